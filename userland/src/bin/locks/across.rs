// The figures across CPUs: the hand-off, sleep/wakeup and ebizzy on
// every CPU, and counters in one line against counters apart (false
// sharing). Included into main.rs.

/// The cross-CPU figures of layout `name` on `n` CPUs: the hand-off and the
/// sleep/wakeup round trip between CPUs 0 and 1, ebizzy with one searcher
/// per CPU (all, and each CPU's share), and the user-level false sharing.
fn across_cpus(timer: Timer, info: &CpuInfo, name: &str, n: u32) {
    let per_op = |fig: &str, ops: u32, samples: (&[u64], Snaps)| {
        per_op_figure(fig, name, ops, samples, info.tsc_hz)
    };
    // Contended: one contender on CPU 0, one on CPU 1.
    RAN_ON.store(0, SeqCst);
    clear_work();
    let mut samples = [0u64; BATCHES];
    let first = userland::model::next_seq();
    let parts = Parts::new(first, 0b11);
    for v in samples.iter_mut() {
        DONE.store(0, SeqCst);
        let _ = threads::spawn_on(contender, HANDOFFS, 16, 0);
        let _ = threads::spawn_on(contender, HANDOFFS, 16, 1);
        threads::sleep(1);
        *v = timer.time(|| {
            threads::wakeup(CHAN_START, true);
            join(&DONE, 2);
        });
    }
    let con = per_op(
        names::CONTENDED_SMP,
        2 * HANDOFFS,
        (&samples, timer.snaps(first)),
    );
    share_work(names::CONTENDED_SMP, name, "handoffs", n, &parts);
    // Sleep/wakeup: this thread on CPU 0, the ponger on CPU 1.
    RAN_ON.store(1, SeqCst);
    clear_work();
    let mut samples = [0u64; BATCHES];
    let first = userland::model::next_seq();
    let parts = Parts::new(first, 0b10);
    for v in samples.iter_mut() {
        DONE.store(0, SeqCst);
        let _ = threads::spawn_on(ponger, ROUND_TRIPS, 16, 1);
        threads::sleep(1);
        *v = timer.time(|| {
            for _ in 0..ROUND_TRIPS {
                ping();
            }
        });
        join(&DONE, 1);
        WORK[0].fetch_add(ROUND_TRIPS, SeqCst);
    }
    let rtt = per_op(
        names::SLEEP_WAKEUP_SMP,
        ROUND_TRIPS,
        (&samples, timer.snaps(first)),
    );
    share_work(names::SLEEP_WAKEUP_SMP, name, "wakeups", n, &parts);
    // ebizzy: one searcher per CPU, racing for the records. Each CPU's
    // share is the records its searcher found, 0 included: under icount
    // QEMU runs one vCPU at a time in long turns, and one CPU's searcher
    // may find them all before another's first turn.
    RAN_ON.store(0, SeqCst);
    let mut samples = [0u64; BATCHES];
    let mut found = [0u32; 8];
    let first = userland::model::next_seq();
    let parts = Parts::new(first, (1u32 << n) - 1);
    for v in samples.iter_mut() {
        DONE.store(0, SeqCst);
        RECORDS.store(0, SeqCst);
        for f in FOUND.iter() {
            f.store(0, SeqCst);
        }
        *v = timer.time(|| {
            for c in 0..n {
                let _ = threads::spawn_on(searcher, EBIZZY_RECORDS, 16, c);
            }
            join(&DONE, n);
        });
        for (sum, f) in found.iter_mut().zip(FOUND.iter()) {
            *sum += f.load(SeqCst);
        }
    }
    let all = ebizzy_figure(
        names::EBIZZY_SMP,
        name,
        (&samples, timer.snaps(first)),
        info.tsc_hz,
    );
    let found = &found[..n as usize];
    share(names::EBIZZY, names::EBIZZY_SMP, name, "records", found, &parts);
    let mut each = Line::new();
    for f in found {
        let _ = write!(each, " {f}");
    }
    // False sharing: a thread on every CPU increments its own counter,
    // this one on CPU 0. One run: the others wait in the kernel; the timed
    // region wakes them, increments, and waits for them by spinning (with
    // `pause`), writing nothing they read: under the model a CPU that
    // woke follows the last write it saw in QEMU's order, and a system
    // call here (taking the scheduler lock) after the loop would be one.
    let run = |stride: u32, incs: u32| -> u64 {
        INCS.store(incs, SeqCst);
        DONE.store(0, SeqCst);
        GO.store(0, SeqCst);
        for c in 1..n {
            let _ = threads::spawn_on(incrementer, c * stride, 16, c);
        }
        // Time for each to reach its sleep.
        threads::sleep(1);
        RAN_ON.fetch_or(1, SeqCst);
        timer.time(|| {
            GO.store(1, SeqCst);
            threads::wakeup(CHAN_FS_GO, true);
            increment(&COUNTERS.0[0], incs);
            while DONE.load(SeqCst) < n - 1 {
                core::hint::spin_loop();
            }
        })
    };
    let mut fs = [0f64; 3];
    for (k, (fig, stride)) in [
        (names::FALSE_SHARING_LINE, 4u32),
        (names::FALSE_SHARING_ADJACENT, 64),
        (names::FALSE_SHARING_APART, 128),
    ]
    .into_iter()
    .enumerate()
    {
        // The model's calibration: the same runs without increments (its
        // coherence misses are the hand-shake's, subtracted from each batch).
        let calib = userland::model::next_seq();
        for _ in 0..FS_CALIB_RUNS {
            run(stride, 0);
        }
        RAN_ON.store(0, SeqCst);
        clear_work();
        let mut samples = [0u64; BATCHES];
        let first = userland::model::next_seq();
        let parts = Parts::new(first, (1u32 << n) - 1);
        for v in samples.iter_mut() {
            *v = run(stride, INCREMENTS);
            WORK[0].fetch_add(INCREMENTS, SeqCst);
        }
        let ran = RAN_ON.swap(1, SeqCst);
        let snaps = Snaps {
            stream: SNAP_USER,
            calib,
            calib_runs: FS_CALIB_RUNS,
            batches: first,
        };
        fs[k] = figure(
            names::LOCKS,
            fig,
            name,
            Measure::Throughput,
            "ops/s",
            n * INCREMENTS,
            (&samples, snaps),
            info.tsc_hz,
            ran,
        );
        share_work(fig, name, "increments", n, &parts);
    }
    println!(
        "{name:<8} across {n} CPUs: contended {con:.1}, sleep/wake {rtt:.1} per op; ebizzy {all:.0} rec/s (records found per CPU:{}); false sharing ops/s: one line {:.0}, adjacent lines {:.0}, 128 apart {:.0}",
        each.as_str(), fs[0], fs[1], fs[2]
    );
}

/// Increments per thread per false-sharing batch.
const INCREMENTS: u32 = 20_000;
/// The counters of the false-sharing threads, placed at a byte offset
/// each (0, 4, 8... in one line; 0, 64, ...; 0, 128, ...).
#[repr(C, align(128))]
struct Counters([AtomicU32; 256]);
static COUNTERS: Counters = Counters([const { AtomicU32::new(0) }; 256]);
/// Released by the timing thread once every incrementer exists.
static GO: AtomicU32 = AtomicU32::new(0);
/// Where the incrementers wait for GO.
const CHAN_FS_GO: u32 = 0x5003;
/// Increments per thread in the running false-sharing run (0 in the
/// model's calibration runs).
static INCS: AtomicU32 = AtomicU32::new(0);
/// Calibration runs of each false-sharing figure (the model's).
const FS_CALIB_RUNS: u32 = 3;

/// A false-sharing thread: waits for GO, then increments the counter at
/// byte `offset` (plain loads and stores: the line moves between CPUs).
fn incrementer(offset: u32) {
    let slot = note_cpu();
    let c = &COUNTERS.0[(offset / 4) as usize % 256];
    // Asleep in the kernel until GO, not spinning: a CPU that idles until
    // the wake-up starts its modelled clock there (the model's rule), so
    // the CPUs' loops overlap in modelled time as on parallel hardware; a
    // spinning one would run its clock ahead of the others'.
    while GO.load(SeqCst) == 0 {
        let _ = threads::sleep_on(CHAN_FS_GO, 1);
    }
    part_snap(slot);
    let incs = INCS.load(SeqCst);
    increment(c, incs);
    part_snap(slot);
    WORK[slot].fetch_add(incs, SeqCst);
    finished();
}

/// `n` increments of `c` by plain loads and stores (the line moves
/// between CPUs).
#[inline(never)]
fn increment(c: &AtomicU32, n: u32) {
    for _ in 0..n {
        c.store(
            c.load(core::sync::atomic::Ordering::Relaxed) + 1,
            core::sync::atomic::Ordering::Relaxed,
        );
    }
}

/// Zeroes every CPU's count of work (`WORK`) before a figure's batches.
fn clear_work() {
    for w in WORK.iter() {
        w.store(0, SeqCst);
    }
}

/// Reports the `share` of `locks.<fig>.<layout>` from `WORK`, CPUs `0..n`:
/// the figures whose threads each do a fixed amount of work, so the
/// shares are equal unless a thread did not finish.
fn share_work(fig: &str, layout: &str, work: &str, n: u32, parts: &Parts) {
    let mut per_cpu = [0u32; 8];
    for (p, w) in per_cpu.iter_mut().zip(WORK.iter()) {
        *p = w.load(SeqCst);
    }
    share(names::LOCKS, fig, layout, work, &per_cpu[..n as usize], parts);
}
