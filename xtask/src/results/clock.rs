//! The clocks a run's figures can be in: what `--clock` names, what a
//! results file's `clock` holds, and what each says about its figures.
//! The machines choose one and start it (`machine`); the results only
//! name it, so the type lives here, below both.

/// Which clock the figures are in: what `--clock` names, and what the
/// reports say. [`Clock::guest`] is what the kernel's timed regions read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Clock {
    /// QEMU -icount: one tick per guest instruction (TCG only; exact, deterministic).
    Icount,
    /// RDTSC: real cycles under KVM and on real hardware.
    Tsc,
    /// icount plus the model plugin: modelled cycles of a CPU profile
    /// (--profile, --virt) beside the exact instruction counts (TCG only).
    Model,
}

impl Clock {
    pub const ALL: &[Clock] = &[Clock::Icount, Clock::Tsc, Clock::Model];

    /// The clock's name, as `--clock` takes it and the reports print it.
    pub fn key(self) -> &'static str {
        match self {
            Clock::Icount => "icount",
            Clock::Tsc => "tsc",
            Clock::Model => "model",
        }
    }

    /// The clock the guest reads, written on its command line as
    /// `clock=<key>` (a clock computed on the host may read icount in the
    /// guest).
    pub fn guest(self) -> abi::cmdline::Clock {
        match self {
            // The model runs under icount: the guest counts instructions,
            // the plugin computes the cycles.
            Clock::Icount | Clock::Model => abi::cmdline::Clock::Icount,
            Clock::Tsc => abi::cmdline::Clock::Tsc,
        }
    }

    /// The clock a report names (`None` for the kernel's `none`, a CPU
    /// without a TSC, or a name this tool does not know).
    pub fn from_key(key: &str) -> Option<Clock> {
        Self::ALL.iter().copied().find(|c| c.key() == key)
    }

    /// What `run`'s banner says after `clock=`.
    pub fn banner(self) -> &'static str {
        match self {
            Clock::Icount => "icount (1 tick = 1 guest instruction)",
            Clock::Tsc => "tsc",
            Clock::Model => "model (modelled cycles from the model plugin)",
        }
    }

    /// Every boot gives the same count: there is no distribution to test,
    /// only "identical" or "differs by exactly N".
    pub fn exact(self) -> bool {
        match self {
            Clock::Icount | Clock::Model => true,
            Clock::Tsc => false,
        }
    }

    /// Seconds derived from this clock are the guest's virtual time, not
    /// the host's.
    pub fn virtual_time(self) -> bool {
        match self {
            Clock::Icount | Clock::Model => true,
            Clock::Tsc => false,
        }
    }

    /// The figures are emulator artefacts when read under TCG (`tcg`): TCG's
    /// TSC follows the host's clock.
    pub fn emulated(self, tcg: bool) -> bool {
        match self {
            Clock::Icount | Clock::Model => false,
            Clock::Tsc => tcg,
        }
    }

    /// What one tick is; `tcg`: the guest ran under TCG.
    pub fn unit(self, tcg: bool) -> &'static str {
        match self {
            // The guest's ticks; the model's cycles carry their own label.
            Clock::Icount | Clock::Model => "instructions",
            Clock::Tsc if tcg => "TCG ticks",
            Clock::Tsc => "cycles",
        }
    }
}
