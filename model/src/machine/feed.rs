//! What the plugin's callbacks do, without QEMU: [`Feed`] takes each
//! callback's arguments (an instruction's call, a data access, the exit)
//! and hands the [`Machine`] its events, choosing the quick ways as the
//! plugin's hot paths do. The plugin (`crate::plugin`) is a shim over it
//! that turns QEMU's handles into these arguments; the tests drive it the
//! same way, with no dispatch of their own.
//!
//! What stays QEMU's: the inline adds of [`Step::Inline`] instructions sum
//! into one accumulator in QEMU's generated code; each callback hands the
//! feed what it holds (`acc`) or the means to empty it (`take_acc`), and
//! the feed credits it to the vCPU of the last callback, as the costs of
//! the instructions inlined after that call (its [`Site`]'s `run`).

use super::{Insn, Machine, Step, INLINE_INSN_SHIFT};
use crate::decode::{Class, Decoded};

/// An instruction the plugin calls on: the instruction, and the costs of
/// the instructions after it in its block that the plan inlined, up to the
/// next call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    pub insn: Insn,
    pub run: &'static [u32],
}

/// The reference machine ([`Machine::set_reference`]) fed the events the
/// fast one is, each instruction a call of its own: those the plan inlined
/// as instructions that only cost (their costs), on the page of the
/// instruction before them (where the plan inlines one, a marker aside).
/// What a `reference=on` boot's model would make of this boot's order of
/// the vCPUs' events.
#[derive(Debug)]
struct Shadow {
    machine: Machine,
    /// Per vCPU, the address of its last instruction that is no marker.
    last: Vec<u32>,
}

impl Shadow {
    fn exec(&mut self, vcpu: usize, insn: &Insn) {
        if insn.decoded.class != Class::Marker {
            if self.last.len() <= vcpu {
                self.last.resize(vcpu + 1, 0);
            }
            self.last[vcpu] = insn.vaddr;
        }
        self.machine.exec(vcpu, insn);
    }

    /// The inline instructions of `run`, executed on `vcpu` in order.
    fn run(&mut self, vcpu: usize, run: &[u32]) {
        let vaddr = self.last.get(vcpu).copied().unwrap_or(0);
        let decoded = Decoded {
            class: Class::Plain,
            vector: 0,
            marker: 0,
        };
        for &cost in run {
            self.machine.exec(
                vcpu,
                &Insn {
                    vaddr,
                    decoded,
                    cost,
                },
            );
        }
    }
}

/// The machine as the plugin's callbacks feed it (see the module's doc).
#[derive(Debug)]
pub struct Feed {
    pub machine: Machine,
    /// `reference=shadow`: the reference machine beside this one, fed the
    /// same events (several CPUs: with one, the quick ways skip the calls
    /// it is fed from).
    shadow: Option<Box<Shadow>>,
    /// The vCPU of the last callback, and the costs of the inline
    /// instructions it may run before the next: what the accumulator
    /// holds belongs to them.
    last_vcpu: usize,
    pending: &'static [u32],
}

impl Feed {
    /// A feed of `machine`, with `shadow`, a machine in reference mode, fed
    /// beside it.
    pub fn new(machine: Machine, shadow: Option<Machine>) -> Feed {
        Feed {
            machine,
            shadow: shadow.map(|machine| {
                Box::new(Shadow {
                    machine,
                    last: Vec::new(),
                })
            }),
            last_vcpu: 0,
            pending: &[],
        }
    }

    /// How the instructions of a translated block are counted, and for
    /// each call the costs of the instructions inlined after it (what its
    /// [`Site`] carries): [`Machine::plan`], or in reference mode every
    /// instruction a call.
    pub fn plan(&self, block: &[Insn]) -> Vec<(Step, Vec<u32>)> {
        let mut plan = self.machine.plan(block);
        if self.machine.reference() {
            plan.fill(Step::Call);
        }
        (0..block.len())
            .map(|i| {
                let run = match plan[i] {
                    Step::Call => block[i + 1..]
                        .iter()
                        .zip(&plan[i + 1..])
                        .take_while(|(_, st)| matches!(st, Step::Inline(_)))
                        .map(|(x, _)| x.cost)
                        .collect(),
                    Step::Inline(_) => Vec::new(),
                };
                (plan[i], run)
            })
            .collect()
    }

    /// Credits what the accumulator held (`acc`): its instructions are the
    /// next ones of `pending`, on the vCPU of the last callback.
    #[inline(always)]
    fn credit(&mut self, acc: u64) {
        if acc != 0 {
            let n = ((acc >> INLINE_INSN_SHIFT) as usize).min(self.pending.len());
            let (run, rest) = self.pending.split_at(n);
            self.pending = rest;
            if let Some(sh) = &mut self.shadow {
                sh.run(self.last_vcpu, run);
            }
            self.machine.credit(self.last_vcpu, acc, run);
        }
    }

    /// The call of `site` on `vcpu`, the accumulator holding `acc` (taken).
    #[inline(always)]
    pub fn on_exec(&mut self, vcpu: usize, site: &'static Site, acc: u64) {
        // Most calls of one CPU: this function stays small for them.
        if self.machine.exec_alone(vcpu, &site.insn, acc) {
            self.last_vcpu = vcpu;
            self.pending = site.run;
        } else {
            self.exec(vcpu, site, acc);
        }
    }

    /// A call beyond [`Machine::exec_alone`]'s case: the inline
    /// instructions before it (`acc`, on the vCPU of the last call), then
    /// its instruction.
    #[inline(never)]
    fn exec(&mut self, vcpu: usize, site: &'static Site, acc: u64) {
        self.credit(acc);
        self.last_vcpu = vcpu;
        self.pending = site.run;
        if let Some(sh) = &mut self.shadow {
            sh.exec(vcpu, &site.insn);
        }
        self.machine.exec(vcpu, &site.insn);
    }

    /// A data access on `vcpu` of `size` bytes at `vaddr` (`store`: a
    /// write); `known`: its size and direction were known without asking
    /// QEMU. `take_acc` empties the accumulator; `translate` gives the
    /// physical address (None: MMIO), asked only for a page the machine
    /// has not translated since its last flush.
    #[allow(clippy::too_many_arguments)] // a callback's every argument
    #[inline(always)]
    pub fn on_mem(
        &mut self,
        vcpu: usize,
        vaddr: u32,
        size: u32,
        store: bool,
        known: bool,
        take_acc: impl FnOnce() -> u64,
        translate: impl Fn() -> Option<u64>,
    ) {
        // Most accesses of one CPU are of a kind the instruction made
        // before, and repeat its last line or cost nothing: they make no
        // call (the only one, to the rest, comes last). The instructions
        // inlined before the access can wait for the next call: with one
        // CPU the counters only add up, and nothing reads them in between.
        if known && self.machine.alone() && vcpu == self.last_vcpu {
            if !self.machine.repeat_alone(vcpu, vaddr, size, store)
                && !self.machine.access_alone(vcpu, vaddr, size, store)
            {
                self.access(vcpu, vaddr, size, store, &translate);
            }
            return;
        }
        self.in_order(vcpu, vaddr, size, store, take_acc(), &translate);
    }

    /// A data access on several CPUs (or in reference mode), of a new kind,
    /// or on another vCPU than the last callback's.
    #[inline(never)]
    fn in_order(
        &mut self,
        vcpu: usize,
        vaddr: u32,
        size: u32,
        store: bool,
        acc: u64,
        translate: &dyn Fn() -> Option<u64>,
    ) {
        // The instructions inlined before this access come first, in clock
        // order.
        self.credit(acc);
        // On several CPUs too, an access that repeats the CPU's last line
        // may skip the rest (when it would take its turn at once).
        if !self.machine.repeat(vcpu, vaddr, size, store) {
            self.access(vcpu, vaddr, size, store, translate);
        }
        if let Some(sh) = &mut self.shadow {
            sh.machine.mem(vcpu, vaddr, size, store, translate);
        }
    }

    /// A data access beyond the quick cases ([`Machine::repeat`],
    /// [`Machine::access_alone`]).
    #[inline(never)]
    fn access(
        &mut self,
        vcpu: usize,
        vaddr: u32,
        size: u32,
        store: bool,
        translate: &dyn Fn() -> Option<u64>,
    ) {
        self.machine.mem(vcpu, vaddr, size, store, translate)
    }

    /// QEMU exits: the accumulator's last instructions (`acc`) are
    /// credited and every waiting event applied.
    pub fn finish(&mut self, acc: u64) {
        self.credit(acc);
        self.machine.finish();
        if let Some(sh) = &mut self.shadow {
            sh.machine.finish();
        }
    }

    /// The reference machine's file ([`Machine::report`]), if it runs.
    pub fn shadow_report(&self, ncpus: usize) -> Option<String> {
        self.shadow.as_ref().map(|sh| sh.machine.report(ncpus))
    }
}
