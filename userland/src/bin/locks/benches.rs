// The benchmarks of each pool alignment: contended and uncontended
// locks, sleep/wakeup round trips, turnstile lookups and ebizzy, with
// their timing. Included into main.rs.

// ---- benchmarks ------------------------------------------------------------

static M4: Umtx = Umtx::new();
const CHAN_A: u32 = 0x5000;
const CHAN_B: u32 = 0x5001;
static SHARED: [AtomicU32; 1024] = [const { AtomicU32::new(0) }; 1024];
static RECORDS: AtomicU32 = AtomicU32::new(0);
/// Records found by each CPU's searchers (ebizzy per CPU; slot n: CPU n).
static FOUND: [AtomicU32; 8] = [const { AtomicU32::new(0) }; 8];

const CHAN_START: u32 = 0x5002;

fn contender(n: u32) {
    let slot = note_cpu();
    let me = threads::gettid();
    let _ = threads::sleep_on(CHAN_START, 0);
    part_snap(slot);
    for _ in 0..n {
        let _ = M4.lock(me);
        threads::yield_now();
        let _ = M4.unlock(me);
    }
    part_snap(slot);
    WORK[slot].fetch_add(n, SeqCst);
    finished();
}

static PONGS: AtomicU32 = AtomicU32::new(0);

/// Wakes the thread asleep on `chan`, waiting for it to get there first.
/// `wakeup` has no condition to recheck: one that finds nobody asleep is
/// lost, as in FreeBSD, and on two CPUs the partner may not have gone back
/// to sleep yet. So retry until a sleeper was woken (`yield` lets a partner
/// on this CPU run, `pause` ends this CPU's turn under icount).
fn wake_sleeper(chan: u32) {
    while threads::wakeup(chan, false) == 0 {
        core::hint::spin_loop();
        threads::yield_now();
    }
}

/// Sleeps on `chan` until woken, with no timeout: the partner wakes it
/// only once it sleeps (`wake_sleeper`), and if the partner is gone the
/// kernel's deadlock check ends the task with a report.
fn sleep_until_woken(chan: u32) {
    while threads::sleep_on(chan, 0).is_err() {}
}

/// One sleep/wakeup round trip, the pinger's half: wake the ponger, sleep
/// until it wakes us back.
fn ping() {
    wake_sleeper(CHAN_B);
    sleep_until_woken(CHAN_A);
}

fn ponger(n: u32) {
    let slot = note_cpu();
    part_snap(slot);
    for _ in 0..n {
        sleep_until_woken(CHAN_B);
        wake_sleeper(CHAN_A);
        PONGS.fetch_add(1, SeqCst);
    }
    part_snap(slot);
    WORK[slot].fetch_add(n, SeqCst);
    finished();
}

/// ebizzy-like: search shared memory for a key under the lock, one record
/// per search, until the two searchers have found `target` records.
fn searcher(target: u32) {
    let slot = note_cpu();
    let me = threads::gettid();
    part_snap(slot);
    loop {
        let _ = M4.lock(me);
        if RECORDS.load(SeqCst) >= target {
            let _ = M4.unlock(me);
            break;
        }
        let key = RECORDS.load(SeqCst) & 1023;
        let mut found = 0;
        for (i, w) in SHARED.iter().enumerate() {
            if w.load(SeqCst) == key {
                found = i as u32;
                break;
            }
        }
        SHARED[(found as usize + 1) & 1023].store(key, SeqCst);
        RECORDS.fetch_add(1, SeqCst);
        FOUND[slot].fetch_add(1, SeqCst);
        let _ = M4.unlock(me);
    }
    part_snap(slot);
    finished();
}

/// Batches per figure, for each layout.
const BATCHES: usize = 8;
/// Lock/unlock pairs per uncontended batch.
const UNCONTENDED_OPS: u32 = 2_000;
/// Hand-offs per contender per contended batch (two contenders).
const HANDOFFS: u32 = 50;
/// Sleep/wakeup round trips per batch.
const ROUND_TRIPS: u32 = 50;
/// Turnstile-chain lookups per batch.
const LOOKUPS: u32 = 1_000;
/// Records the two ebizzy searchers find per batch.
const EBIZZY_RECORDS: u32 = 1_000;

/// The layouts `pool_align(bytes)` takes, and their names in records.
const LAYOUTS: [(u32, &str); 3] = [
    (128, names::LAYOUTS[0]),
    (64, names::LAYOUTS[1]),
    (0, names::LAYOUTS[2]),
];

/// The timer's calibration: its overhead in ticks, and where its model
/// snapshots are (`BATCHES` empty timed regions).
#[derive(Clone, Copy)]
struct Timer {
    fence: Fence,
    overhead: u64,
    calib: u32,
}

impl Timer {
    /// Times `f` once (`bench::timed_region`), the timer's overhead subtracted.
    fn time(&self, f: impl FnOnce()) -> u64 {
        bench::timed_region(self.fence, f).saturating_sub(self.overhead)
    }

    /// Where a figure's snapshots are whose first batch began at user
    /// snapshot `first`, with this calibration.
    fn snaps(&self, first: u32) -> Snaps {
        Snaps {
            stream: SNAP_USER,
            calib: self.calib,
            calib_runs: BATCHES as u32,
            batches: first,
        }
    }

    /// Times `BATCHES` batches of `f`; each sample is a batch's ticks, the
    /// timer's own overhead subtracted.
    fn batches(&self, mut f: impl FnMut()) -> ([u64; BATCHES], Snaps) {
        let first = userland::model::next_seq();
        let mut out = [0u64; BATCHES];
        for v in out.iter_mut() {
            *v = self.time(&mut f);
        }
        (out, self.snaps(first))
    }
}

/// Reports one figure of layout `layout`: `group.figure.layout` (or
/// `group.layout` without a figure); returns its median.
#[allow(clippy::too_many_arguments)]
/// A per-operation locks figure of `layout`, naming the CPUs its threads
/// noted in `RAN_ON` (then CPU 0 alone again, for the next figure).
fn per_op_figure(fig: &str, layout: &str, ops: u32, samples: (&[u64], Snaps), tsc_hz: u64) -> f64 {
    let ran = RAN_ON.swap(1, SeqCst);
    figure(
        names::LOCKS,
        fig,
        layout,
        Measure::PerOp,
        "",
        ops,
        samples,
        tsc_hz,
        ran,
    )
}

/// The ebizzy figure of pool layout `layout` (`variant` empty for the two
/// searchers on one CPU, [`names::EBIZZY_SMP`] for one on every CPU):
/// records per second, on the CPUs its searchers ran on (`RAN_ON`, reset).
fn ebizzy_figure(variant: &str, layout: &str, samples: (&[u64], Snaps), tsc_hz: u64) -> f64 {
    let ran = RAN_ON.swap(1, SeqCst);
    figure(
        names::EBIZZY,
        variant,
        layout,
        Measure::Throughput,
        "records/s",
        EBIZZY_RECORDS,
        samples,
        tsc_hz,
        ran,
    )
}

fn figure(
    group: &str,
    figure: &str,
    layout: &str,
    measure: Measure,
    unit: &str,
    ops: u32,
    (samples, snaps): (&[u64], impl Into<Option<Snaps>>),
    tsc_hz: u64,
    cpus: u32,
) -> f64 {
    let name = figure_name(group, figure, layout);
    bench::report(&Figure {
        name: name.as_str(),
        mech: names::LOCKS,
        path: if figure.is_empty() { group } else { figure },
        call: layout,
        measure,
        unit,
        batch_size: ops,
        samples,
        tsc_hz,
        counters: None,
        snaps: snaps.into(),
        cpus,
    })
    .median
}

/// A figure's record name: `group.figure.layout` (or `group.layout`).
fn figure_name(group: &str, figure: &str, layout: &str) -> Line {
    let mut name = Line::new();
    let _ = if figure.is_empty() {
        write!(name, "{group}.{layout}")
    } else {
        write!(name, "{group}.{figure}.{layout}")
    };
    name
}

/// Reports each CPU's share of a cross-CPU figure's work (its `share`
/// record): `per_cpu[n]` operations of kind `work` were done on CPU n,
/// over every batch. A CPU that did none is reported as 0. `parts`: where
/// each CPU's part of each batch lies in its user stream.
fn share(group: &str, figure: &str, layout: &str, work: &str, per_cpu: &[u32], parts: &Parts) {
    let n = per_cpu.len();
    let list = |v: &[u32]| {
        let mut l = Line::new();
        for (c, x) in v.iter().enumerate() {
            let _ = write!(l, "{}{x}", if c == 0 { "" } else { "," });
        }
        l
    };
    record!(kind::SHARE, "name" => figure_name(group, figure, layout).as_str(),
        "work" => work, "per_cpu" => list(per_cpu).as_str(),
        "stream" => userland::abi::model::stream_key(SNAP_USER),
        "snap_first" => list(&parts.first[..n]).as_str(),
        "snap_per_batch" => list(&parts.per_batch[..n]).as_str());
}

fn benches() -> i32 {
    let info: CpuInfo = sys::cpuinfo();
    if info.features & FEATURE_TSC == 0 {
        println!("locks: this CPU has no TSC: nothing can be timed");
        record!(kind::CLOCK, "clock" => "none", "tsc_hz" => 0);
        return 0;
    }
    let fence = Fence::for_cpu(&info);
    let unit = info.unit();
    let clock = if info.clock == 1 { "icount" } else { "tsc" };
    // The fenced timer pair around nothing: the median of a few.
    let mut timer = Timer {
        fence,
        overhead: 0,
        calib: userland::model::next_seq(),
    };
    let (mut empty, _) = timer.batches(|| {});
    empty.sort_unstable();
    timer.overhead = empty[BATCHES / 2];
    let timer_overhead = timer.overhead;
    record!(kind::CLOCK, "clock" => clock, "fence" => Esc(fence.describe()),
        "tsc_hz" => info.tsc_hz, "timer_overhead" => timer_overhead, "batches" => BATCHES,
        "interrupts" => "preemption");
    let me = threads::gettid();
    let every = info.pool_align == POOL_ALIGN_EVERY;
    let n = info.cpus.max(1);
    println!(
        "locks: {} compared in one boot; {unit} per operation, medians of {BATCHES} batches",
        if every {
            "pool alignments"
        } else {
            "one pool alignment (pool_align=)"
        }
    );
    // No emulator here models caches: say which one ran, and what its
    // ticks are. On KVM or real hardware the cache effect is in the figures.
    if info.emulated == userland::abi::syscall::EMULATOR_BOCHS {
        println!(
            "locks: Bochs does not model caches, so alignment cannot change Bochs figures ({}): real KVM or hardware shows the cache effect",
            userland::abi::syscall::BOCHS_TICK
        );
    } else if info.emulated != userland::abi::syscall::EMULATOR_NONE || info.clock == 1 {
        println!("locks: TCG does not model caches, so alignment cannot change TCG figures: icount counts instructions; `--clock model` models the cache effect, real KVM or hardware shows it");
    }
    // The table is printed once every layout is measured: the kernel's
    // `pools:` line for each layout comes when it is set, not amid the rows.
    let mut rows: [Option<(&str, [f64; 5])>; LAYOUTS.len()] = [None; LAYOUTS.len()];
    for (row, (align, name)) in rows.iter_mut().zip(LAYOUTS) {
        if !every && info.pool_align != align {
            continue;
        }
        let r = sys::call(Mechanism::Int80, nr::POOL_ALIGN, [align, 0, 0, 0, 0, 0]);
        if r != 0 {
            println!("locks: pool_align({align}) failed: {}", r as i32);
            return 1;
        }
        // Each figure's threads note their CPUs in RAN_ON (the main
        // thread runs on CPU 0).
        let per_op = |fig: &str, ops: u32, samples: (&[u64], Snaps)| {
            per_op_figure(fig, name, ops, samples, info.tsc_hz)
        };
        RAN_ON.store(1, SeqCst);
        // Uncontended: the user fast path, no kernel entry.
        let (samples, snaps) = timer.batches(|| {
            for _ in 0..UNCONTENDED_OPS {
                let _ = M4.lock(me);
                let _ = M4.unlock(me);
            }
        });
        let unc = per_op("uncontended", UNCONTENDED_OPS, (&samples, snaps));
        // Contended: two threads hand the mutex back and forth.
        let mut samples = [0u64; BATCHES];
        let first = userland::model::next_seq();
        for v in samples.iter_mut() {
            DONE.store(0, SeqCst);
            let _ = threads::spawn(contender, HANDOFFS, 16);
            let _ = threads::spawn(contender, HANDOFFS, 16);
            threads::sleep(1);
            *v = timer.time(|| {
                threads::wakeup(CHAN_START, true);
                join(&DONE, 2);
            });
        }
        let con = per_op("contended", 2 * HANDOFFS, (&samples, timer.snaps(first)));
        // Sleep/wakeup round trip between two threads.
        let mut samples = [0u64; BATCHES];
        let first = userland::model::next_seq();
        for v in samples.iter_mut() {
            DONE.store(0, SeqCst);
            let _ = threads::spawn(ponger, ROUND_TRIPS, 16);
            threads::sleep(1);
            *v = timer.time(|| {
                for _ in 0..ROUND_TRIPS {
                    ping();
                }
            });
            join(&DONE, 1);
        }
        let rtt = per_op("sleep_wakeup", ROUND_TRIPS, (&samples, timer.snaps(first)));
        // One turnstile-chain lookup: n lookups against none.
        let call = |n: u32| sys::call(Mechanism::Int80, nr::LOOKUP_BENCH, [n, 0, 0, 0, 0, 0]);
        // The calibration is the same call with no lookups (its median),
        // so the figure is the lookups alone.
        let calib = userland::model::next_seq();
        let mut base = [0u64; BATCHES];
        for v in base.iter_mut() {
            *v = bench::timed_region(fence, || {
                call(0);
            });
        }
        base.sort_unstable();
        let empty_call = Timer {
            fence,
            overhead: base[BATCHES / 2],
            calib,
        };
        let (samples, snaps) = empty_call.batches(|| {
            call(LOOKUPS);
        });
        let look = per_op("lookup", LOOKUPS, (&samples, snaps));
        // ebizzy-like: two searchers find EBIZZY_RECORDS records.
        let mut samples = [0u64; BATCHES];
        let first = userland::model::next_seq();
        for v in samples.iter_mut() {
            DONE.store(0, SeqCst);
            RECORDS.store(0, SeqCst);
            *v = timer.time(|| {
                let _ = threads::spawn(searcher, EBIZZY_RECORDS, 16);
                let _ = threads::spawn(searcher, EBIZZY_RECORDS, 16);
                join(&DONE, 2);
            });
        }
        let per_s = ebizzy_figure("", name, (&samples, timer.snaps(first)), info.tsc_hz);
        *row = Some((name, [unc, con, rtt, look, per_s]));
        if n > 1 {
            across_cpus(timer, &info, name, n);
        }
    }
    println!(
        "{:<8} {:>12} {:>12} {:>12} {:>12} {:>14}",
        "align", "uncontended", "contended", "sleep/wake", "lookup", "ebizzy rec/s"
    );
    let short = if unit == "instructions" {
        "insns"
    } else {
        unit
    };
    println!(
        "{:<8} {:>12} {:>12} {:>12} {:>12} {:>14}",
        "", short, short, short, short, "records/s"
    );
    for (name, [unc, con, rtt, look, per_s]) in rows.into_iter().flatten() {
        println!(
            "{:<8} {:>12.1} {:>12.1} {:>12.1} {:>12.1} {:>14.0}",
            name, unc, con, rtt, look, per_s
        );
    }
    0
}
