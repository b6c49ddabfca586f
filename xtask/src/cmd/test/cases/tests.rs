use super::matrix::selectors_16bit;
use super::*;
use crate::cmd::Emulator;
use crate::machine::qemu::Threads;
use crate::machine::{self, BootLog, Ending};
use abi::exit::Outcome;
use std::time::Duration;

fn log_of(serial: &str) -> BootLog {
    BootLog {
        backend: "QEMU",
        ending: Ending::Exited(Outcome::Success),
        serial: serial.into(),
        stderr: String::new(),
        wall: Duration::ZERO,
    }
}

#[test]
fn selectors_must_be_16_bit() {
    let ok = "  EIP 0x40001000  CS 0x001b  EFLAGS 0x00000202\n  ESI 0  DS 0x0023 ES 0x0023\ncpu: new CS:EIP = 0x0008:0x1\n [0x1] CS     = 0x0000001b";
    assert!(selectors_16bit(&log_of(ok)).is_ok());
    let bad = "  ESI 0x0  EDI 0x0  EBP 0x0  DS 0x0023 ES 0x40000023";
    let e = selectors_16bit(&log_of(bad)).unwrap_err();
    assert!(e.contains("ES 0x40000023"), "{e}");
}
use crate::kbuild::Artifacts;
use crate::machine::{Clock, Loader};

#[test]
fn every_case_is_a_machine() {
    let art = Artifacts {
        kernel: "/k/kernel".into(),
        programs: vec![],
    };
    for c in all().filter(|c| !c.grub && c.emulator == Emulator::Qemu) {
        let m = c
            .machine(&art, std::path::Path::new("/x"))
            .unwrap_or_else(|e| panic!("{}: {e:#}", c.name));
        assert!(m.cmdline.starts_with(c.cmdline), "{}", c.name);
        assert_eq!(m.loader, Loader::Direct);
        let want = if c.threads == Threads::Multi {
            Clock::Tsc
        } else {
            Clock::Icount
        };
        assert_eq!(m.clock, want, "{}", c.name);
    }
    // Bochs cases boot the GRUB image (built at boot time), on the TSC.
    for c in all().filter(|c| c.emulator == Emulator::Bochs) {
        let spec = c.spec();
        assert!(
            matches!(spec.backend, machine::BackendSpec::Bochs(_)),
            "{}",
            c.name
        );
        assert!(c.name.starts_with("bochs"), "{}", c.name);
        assert!(!c.paused && c.threads == Threads::Single, "{}", c.name);
    }
    let names: std::collections::BTreeSet<_> = all().map(|c| c.name).collect();
    assert_eq!(names.len(), all().count(), "two cases share a name");
}

/// A skipped test ran nothing: it never counts toward "at least N tests",
/// and a test a check names must have passed, not been skipped.
#[test]
fn skips_are_not_passes() {
    let serial = "KTAP version 1\n@@tb1 test name=a result=pass\nok 1 a\n@@tb1 test name=b result=skip detail=no%20SEP\nok 2 b # SKIP no SEP\n@@tb1 test name=c result=skip\nok 3 c # SKIP\n1..3\n@@tb1 end status=success\n";
    let log = log_of(serial);
    let r = crate::report::parse_log(serial).unwrap();
    assert!(checks::all_tests_pass(&log, &r, 1).is_ok());
    // The KTAP lines must tell what the records tell.
    let bad = serial.replace("ok 2 b # SKIP no SEP", "ok 2 b");
    let e = checks::all_tests_pass(&log_of(&bad), &r, 1).unwrap_err();
    assert!(e.contains("KTAP test 2 is \"b\" (pass)"), "{e}");
    let none = serial.replace("KTAP version 1\n", "");
    let e = checks::all_tests_pass(&log_of(&none), &r, 1).unwrap_err();
    assert!(e.contains("no KTAP"), "{e}");
    let e = checks::all_tests_pass(&log, &r, 2).unwrap_err();
    assert!(e.contains("only 1 tests passed (2 skipped)"), "{e}");
    assert!(checks::test_passed(&r, "a").is_ok());
    let e = checks::test_passed(&r, "b").unwrap_err();
    assert!(e.contains("Some(\"skip\")") && e.contains("no SEP"), "{e}");
    assert!(checks::test_passed(&r, "d").is_err());
}

/// The test boot passes under every `pmap=` and both `fork=` on 1 and on 2
/// CPUs: among the QEMU cases in test mode (every test, not one named),
/// each pair boots at least once on each count.
#[test]
fn every_pmap_and_fork_on_1_and_2_cpus() {
    use abi::cmdline::{Fork, Mode, Options, Pmap};
    for cpus in [1, 2] {
        for (pmap, pk) in Pmap::ALL {
            for (fork, fk) in Fork::ALL {
                let booted = all().any(|c| {
                    let o = Options::parse(c.cmdline, &mut |_| {});
                    c.emulator == Emulator::Qemu
                        && c.cpus == cpus
                        && o.mode == Mode::Test
                        && o.test.is_none()
                        && (o.pmap, o.fork) == (pmap, fork)
                });
                assert!(
                    booted,
                    "no test boot on {cpus} CPU(s) under pmap={pk} fork={fk}"
                );
            }
        }
    }
}

/// The CPU matrix's table shares a boot with the case that runs a model's
/// tests alone on one CPU, and only with such a case.
#[test]
fn the_matrix_shares_only_a_models_own_test_boot() {
    let found = |e, cpu| test_mode_on(e, cpu).map(|c| c.cmdline);
    assert_eq!(
        found(Emulator::Qemu, "486"),
        Some("mode=test pmap=cr3 fork=cow")
    );
    assert_eq!(
        found(Emulator::Qemu, "phenom"),
        Some("mode=test pmap=cr3 fork=copy")
    );
    assert_eq!(
        found(Emulator::Bochs, "amd_k6_2_chomper"),
        Some("mode=test")
    );
    // No case of its own: the table boots it.
    assert_eq!(found(Emulator::Qemu, "n270"), None);
    // The Pentium 4's test case runs on 2 CPUs; the matrix's row has one.
    assert_eq!(found(Emulator::Bochs, "p4_prescott_celeron_336"), None);
    // The same model under the other emulator is another machine.
    assert_eq!(found(Emulator::Bochs, "phenom"), None);
    for c in all().filter(|c| {
        test_mode_on(c.emulator, c.cpu.unwrap_or("")).is_some_and(|m| std::ptr::eq(m, *c))
    }) {
        assert_eq!(c.cpus, 1, "{}", c.name);
        assert!(c.cmdline.starts_with("mode=test"), "{}", c.name);
    }
}
