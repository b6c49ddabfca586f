//! The guest ↔ model-plugin protocol (`--clock model`).
//!
//! The model clock is a QEMU TCG plugin (the `model` crate) that sees every
//! guest instruction and memory access and computes modelled cycles of a
//! named CPU family. The guest talks to it in two ways, both of which cost
//! nothing on a real CPU and are invisible to every other clock:
//!
//! 1. **Markers.** A multi-byte NOP, `nopl disp32(%eax)` (bytes
//!    [`MARKER_OPCODE`] then the 32-bit displacement, little endian), whose
//!    displacement is [`MARKER_MAGIC`] | id. The plugin decodes it at
//!    translation time. The magic sits in the high half so that the NOPs an
//!    assembler emits for alignment padding (small displacements) never
//!    match. A marker is one instruction: inside a timed region the
//!    benchmark's overhead calibration subtracts it like any other.
//! 2. **The argument channel.** After a marker that takes an argument
//!    ([`takes_arg`]), the *next data load* the same CPU performs carries the
//!    argument as its virtual address. The plugin does not charge that load
//!    (nor any marker) to the model; it only reads its address.
//!
//! The plugin writes, when QEMU exits, one text file of lines:
//!
//! ```text
//! model1 profile=<name> virt=<0|1> ncpus=<n>
//! param <key>=<value> ...                      the profile's parameters
//! snap cpu=<c> stream=<s> seq=<n> insns=<n> cycles=<n> l1_misses=<n> l2_misses=<n> tlb_misses=<n> tlb_flushes=<n> coherence_misses=<n> invalidations=<n> transfers=<n> invalidations_received=<n> upgrades=<n> ipis=<n> vm_exits=<n> clock=<n>
//! capped cpu=<c> stream=<s> kept=<n> dropped=<n>    only past the cap
//! forced events=<n> limit=<n>                      only if the queues overflowed
//! end
//! ```
//!
//! A stream keeps at most [`MAX_SNAPS_PER_STREAM`] snapshots per CPU; the
//! markers past them are counted (the numbering goes on) but not kept, and
//! a `capped` line says how many were dropped. A guest that loops on
//! markers so cannot grow the host's memory and file without bound; the
//! host marks the figures that needed a dropped snapshot incomplete. A
//! `forced` line says how many events the plugin applied out of modelled-
//! clock order because more than `limit` waited (one CPU's clock ran so
//! far ahead of another's that its queue filled); the host says so beside
//! that boot's figures. A file whose first line is `error <why>` holds
//! no figures: the plugin saw callbacks from more than one thread (QEMU
//! without `-icount` runs each vCPU on a thread of its own, and the model
//! needs them in one stream) and says so instead.
//!
//! A `snap` line is the running totals of CPU `c`'s counters at the moment
//! it executed its `seq`-th (from 0) [`SNAP_USER`] or [`SNAP_KERNEL`] marker
//! (`stream` = the marker's id). The five coherence counters
//! (`coherence_misses` to `upgrades`) and `ipis` are the whole machine's
//! instead: the sum over every CPU of what was applied before the snapshot
//! in modelled-clock order, because a benchmark's misses and IPIs happen on
//! every CPU it runs on. `ipis` counts IPIs sent (stores to the local
//! APIC's interrupt command register), not handler entries: a send is what
//! the model charges (an APIC access, and under `virt` a VM exit: without
//! posted interrupts the hypervisor sends it), and two sends of one vector
//! to a CPU whose interrupts are off are one entry. `vm_exits` counts the
//! exits CPU `c` took under `virt` (CR3 writes and `invlpg` under shadow
//! paging, `hlt`, its IPI sends, and the kicks of IPIs that reached it
//! running); each is inside its `cycles`. `clock` is CPU `c`'s
//! modelled time: its `cycles` plus the time it waited for other CPUs
//! (halted until an IPI, or behind a write it saw); on one CPU it equals
//! `cycles`. The guest counts its own snapshots and
//! prints the sequence numbers a benchmark used in its records, so the host
//! pairs them without guessing.

/// The first three bytes of `nopl disp32(%eax)`: 0F 1F /0 with mod=10, rm=EAX.
pub const MARKER_OPCODE: [u8; 3] = [0x0f, 0x1f, 0x80];
/// Length of a marker instruction in bytes.
pub const MARKER_LEN: usize = 7;
/// High half of every marker's displacement.
pub const MARKER_MAGIC: u32 = 0x7e5b_0000;
/// Mask selecting the magic half of a displacement.
pub const MARKER_MAGIC_MASK: u32 = 0xffff_0000;

/// Snapshot of this CPU's counters, user stream (the ring-3 benchmark driver).
pub const SNAP_USER: u16 = 0x0001;
/// Snapshot of this CPU's counters, kernel stream (kernel-side benchmarks).
pub const SNAP_KERNEL: u16 = 0x0002;

/// Snapshots the model plugin keeps per CPU and stream (262,144: about
/// 50 MB of memory and 65 MB of file each). A benchmark run needs far
/// fewer: two per batch and per calibration run, at most
/// [`crate::cmdline::MAX_BATCHES`] batches per benchmark.
pub const MAX_SNAPS_PER_STREAM: u64 = 1 << 18;
/// Argument: the IDT's linear address (the kernel announces it at boot, and
/// again on each CPU that loads an IDT).
pub const ANNOUNCE_IDT: u16 = 0x0010;
/// Argument: the GDT's linear address (per CPU).
pub const ANNOUNCE_GDT: u16 = 0x0011;
/// Argument: the address of this CPU's TSS.
pub const ANNOUNCE_TSS: u16 = 0x0012;
/// Argument: `ARG_WINDOW + (page >> 12)`, the page an `invlpg` on this CPU
/// is about to invalidate (the plugin cannot read `invlpg`'s operand).
pub const INVLPG_PAGE: u16 = 0x0020;

/// Marker `INTERRUPT + v` is the first instruction of the handler of
/// inter-processor interrupt vector `v` (the kernel's IPI handlers carry
/// it: the shootdown, the reschedule): QEMU delivers hardware interrupts
/// where the plugin sees nothing, so the model charges the delivery there,
/// and the handler starts no earlier than the IPI's flight after its send.
/// Ids `INTERRUPT..=INTERRUPT + 255`.
pub const INTERRUPT: u16 = 0x0100;
/// Marker `DEVICE_INTERRUPT + v`: the same for an interrupt no CPU sent
/// (a timer: the PIT's IRQ 0, a local APIC's timer). Its delivery is
/// charged; it waits for no IPI. Ids `DEVICE_INTERRUPT..=DEVICE_INTERRUPT
/// + 255`.
pub const DEVICE_INTERRUPT: u16 = 0x0200;

/// The marker id of the handler of IPI vector `v`.
pub const fn interrupt_marker(v: u8) -> u16 {
    INTERRUPT + v as u16
}

/// The marker id of the handler of device-interrupt vector `v`.
pub const fn device_interrupt_marker(v: u8) -> u16 {
    DEVICE_INTERRUPT + v as u16
}

/// The vector of an IPI-handler marker, if `id` is one.
pub const fn interrupt_vector(id: u16) -> Option<u8> {
    if id >= INTERRUPT && id <= INTERRUPT + 0xff {
        Some((id - INTERRUPT) as u8)
    } else {
        None
    }
}

/// The vector of a device-interrupt-handler marker, if `id` is one.
pub const fn device_interrupt_vector(id: u16) -> Option<u8> {
    if id >= DEVICE_INTERRUPT && id <= DEVICE_INTERRUPT + 0xff {
        Some((id - DEVICE_INTERRUPT) as u8)
    } else {
        None
    }
}

/// A range of kernel memory that is always mapped and readable in ring 0:
/// 16 MiB up, inside the kernel's identity map ([`KERNEL_MAP_END`]) and
/// above the kernel image (whose stacks have unmapped guard pages, so the
/// image itself is no window; the kernel checks the window at boot). An
/// argument that is a small number rather than an address is passed as a
/// load from `ARG_WINDOW + value`; values up to [`ARG_WINDOW_SIZE`] fit.
///
/// [`KERNEL_MAP_END`]: crate::layout::KERNEL_MAP_END
pub const ARG_WINDOW: u32 = 0x0100_0000;
/// Size of the argument window: 1 MiB, room for any 20-bit page number.
pub const ARG_WINDOW_SIZE: u32 = 0x0010_0000;
const _: () = assert!(
    ARG_WINDOW + ARG_WINDOW_SIZE <= crate::layout::KERNEL_MAP_END,
    "the argument window lies inside the kernel's identity map"
);

/// The displacement that encodes marker `id`.
pub const fn marker_disp(id: u16) -> u32 {
    MARKER_MAGIC | id as u32
}

/// The marker id encoded by an instruction's bytes, if it is a marker.
pub fn decode_marker(insn: &[u8]) -> Option<u16> {
    if insn.len() != MARKER_LEN || insn[..3] != MARKER_OPCODE {
        return None;
    }
    let disp = u32::from_le_bytes([insn[3], insn[4], insn[5], insn[6]]);
    (disp & MARKER_MAGIC_MASK == MARKER_MAGIC).then_some(disp as u16)
}

/// Whether the marker `id` is followed by an argument load.
pub const fn takes_arg(id: u16) -> bool {
    matches!(id, ANNOUNCE_IDT | ANNOUNCE_GDT | ANNOUNCE_TSS | INVLPG_PAGE)
}

/// Where one benchmark's snapshots lie in a stream, as its `samples` record
/// carries them (`abi::report::kind::SAMPLES`): calibration run `k` (the
/// timed region with an empty loop) spans snapshots `calib + 2k` and
/// `calib + 2k + 1`; batch `i` spans `batches + 2i` and `batches + 2i + 1`.
/// The host subtracts the calibration runs' median from every batch, as the
/// guest does with ticks. `calib_runs` may be 0 (nothing to subtract).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Snaps {
    /// [`SNAP_USER`] or [`SNAP_KERNEL`].
    pub stream: u16,
    pub calib: u32,
    pub calib_runs: u32,
    pub batches: u32,
}

/// The record value naming a stream (`stream=user|kernel`).
pub const fn stream_key(stream: u16) -> &'static str {
    match stream {
        SNAP_KERNEL => "kernel",
        _ => "user",
    }
}

/// The stream a record value names.
pub fn stream_from_key(key: &str) -> Option<u16> {
    match key {
        "user" => Some(SNAP_USER),
        "kernel" => Some(SNAP_KERNEL),
        _ => None,
    }
}

impl core::fmt::Display for Snaps {
    /// The record keys, each with a leading space.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            " stream={} snap_calib={} calib_runs={} snap_batches={}",
            stream_key(self.stream),
            self.calib,
            self.calib_runs,
            self.batches
        )
    }
}

/// The pointer-chase benchmark (`prog=chase`): a cyclic chain of loads, one
/// per [`chase::STRIDE`] bytes, over each working set in [`chase::SETS`]
/// (benchmark `chase.<KiB>k`).
/// The stride is two 64-byte lines, so every load touches a line of its own
/// under every profile (32- and 64-byte lines) and an adjacent-line
/// prefetch never brings in a line the chase will use.
pub mod chase {
    /// Bytes between two loads of the chain.
    pub const STRIDE: u32 = 128;
    /// The working sets, in bytes: one that fits every profile's L1 data
    /// cache, one larger than any profile's L1 and smaller than any L2.
    pub const SETS: [u32; 2] = [4 << 10, 128 << 10];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_round_trip_and_padding_never_matches() {
        let d = marker_disp(SNAP_USER).to_le_bytes();
        let insn = [0x0f, 0x1f, 0x80, d[0], d[1], d[2], d[3]];
        assert_eq!(decode_marker(&insn), Some(SNAP_USER));
        // The 7-byte NOP assemblers pad with: nopl 0x0(%eax).
        assert_eq!(decode_marker(&[0x0f, 0x1f, 0x80, 0, 0, 0, 0]), None);
        assert_eq!(decode_marker(&insn[..6]), None);
    }

    #[test]
    fn interrupt_markers_carry_their_vector() {
        assert_eq!(interrupt_vector(interrupt_marker(0xf1)), Some(0xf1));
        assert_eq!(interrupt_vector(interrupt_marker(0)), Some(0));
        assert_eq!(interrupt_vector(SNAP_KERNEL), None);
        assert_eq!(interrupt_vector(INTERRUPT + 0x100), None);
        assert_eq!(
            device_interrupt_vector(device_interrupt_marker(0x20)),
            Some(0x20)
        );
        assert_eq!(device_interrupt_vector(interrupt_marker(0x20)), None);
        assert_eq!(interrupt_vector(device_interrupt_marker(0x20)), None);
        assert!(!takes_arg(device_interrupt_marker(0x20)));
        assert!(!takes_arg(interrupt_marker(0x20)));
    }
}
