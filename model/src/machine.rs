//! The model of a machine: per-CPU L1D, TLBs and counters, the L2 (per CPU
//! or shared) and the optional shared L3, fed one event at a time by the
//! plugin (or by a test): an instruction executes, a data access happens.
//!
//! Modelled cycles = instruction costs (the profile's base plus the extra of
//! the instruction's class) + memory stalls (the latency of the level that
//! hits, less the L1 latency already inside the base cost) + TLB costs (an
//! STLB hit's latency, or a page walk).
//!
//! Rules for what the plugin cannot see, each stated where it is applied:
//! - A page is global iff it lies in the kernel's identity map
//!   (`[0, KERNEL_MAP_END)`) and the machine was built with `pge` (CR4.PGE
//!   and PTE.G in use). This kernel sets neither (kernel/src/arch/paging.rs),
//!   so the plugin's default is off: a CR3 write empties the TLBs.
//! - `int n` delivery reads the IDT entry, the GDT descriptor of the kernel
//!   code segment and, from ring 3, the TSS's ESP0/SS0 and the kernel data
//!   descriptor; QEMU shows the plugin none of these reads, so `deliver`
//!   makes them, at the addresses the kernel announced. The pushes onto the
//!   kernel stack are not modelled (their address, ESP0, is not known).
//! - Exceptions and hardware interrupts are delivered by QEMU outside any
//!   instruction the plugin sees: they are not charged.
//! - `invlpg` flushes the page the kernel announced with `INVLPG_PAGE`
//!   just before it; without an announcement no modelled entry is dropped.
//!
//! Multi-CPU coherence is not modelled yet: each CPU's L1 is private and the
//! events reach the caches in the order QEMU runs the CPUs. Line states
//! are MESI's names (`cache::LineState`) so that a directory can be added.

use abi::layout::{selector, KERNEL_MAP_END, PAGE_SIZE, USER_BASE};
use abi::model::{
    ANNOUNCE_GDT, ANNOUNCE_IDT, ANNOUNCE_TSS, ARG_WINDOW, ARG_WINDOW_SIZE, INVLPG_PAGE,
    SNAP_KERNEL, SNAP_USER,
};

use crate::cache::{Cache, LineState};
use crate::decode::{classify, Class, Decoded};
use crate::profile::{Profile, PAIR_BYTES};
use crate::tlb::Tlb;

const PAGE_SHIFT: u32 = PAGE_SIZE.trailing_zeros();
/// Bytes of one IDT entry or GDT descriptor (SDM Vol. 3A §6.11, §3.4.5).
const DESCRIPTOR_BYTES: u32 = 8;
/// Offset and size of ESP0 and SS0 in the 32-bit TSS (SDM Vol. 3A §7.2.1).
const TSS_ESP0_OFFSET: u32 = 4;
const TSS_ESP0_SS0_BYTES: u32 = 8;
/// Entries of each CPU's cache of virtual-to-physical page translations
/// (plugin bookkeeping, not a modelled structure).
const XLATE_ENTRIES: usize = 512;
const NO_PAGE: u32 = u32::MAX;
/// A translation cache value: the page is MMIO (not modelled).
const IO_PAGE: u32 = u32::MAX;

/// One CPU's running totals, as the snapshot lines give them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Instructions executed, markers included (so this matches icount).
    pub insns: u64,
    pub cycles: u64,
    /// Data lines that missed L1D.
    pub l1_misses: u64,
    /// Data lines that missed L2.
    pub l2_misses: u64,
    /// Page walks: accesses that missed every TLB level.
    pub tlb_misses: u64,
    /// CR3 writes, CR0/CR4 writes and invlpg.
    pub tlb_flushes: u64,
    pub coherence_misses: u64,
    pub invalidations: u64,
    pub transfers: u64,
}

/// Plugin options beside the profile.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// `virt=on`: CR3 writes and invlpg pay a VM exit.
    pub virt: bool,
    /// `pge=on`: kernel identity-map pages are global (see the module doc).
    pub pge: bool,
}

/// An instruction as translated: where it is, its class, its whole cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    pub vaddr: u32,
    pub decoded: Decoded,
    pub cost: u32,
}

/// One snapshot: CPU `cpu`'s totals at its `seq`-th marker of `stream`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Snap {
    pub cpu: usize,
    pub stream: u16,
    pub seq: u64,
    pub counters: Counters,
}

#[derive(Clone, Debug)]
struct Cpu {
    c: Counters,
    l1: Cache,
    dtlb: Tlb,
    itlb: Tlb,
    stlb: Option<Tlb>,
    /// The page of the last instruction: it is the most recently used entry
    /// of the ITLB, so the next instruction on that page hits without a
    /// lookup. Likewise the last data page (DTLB) and the last data line
    /// (L1D, with whether it is already Modified). Cleared by every flush.
    last_ipage: u32,
    last_dpage: u32,
    last_line: u64,
    last_line_dirty: bool,
    /// A marker that waits for its argument load (0: none).
    pending_arg: u16,
    invlpg_page: Option<u32>,
    gdt: Option<u32>,
    tss: Option<u32>,
    idt: Option<u32>,
    /// Next sequence number of the user and kernel snapshot streams.
    seq: [u64; 2],
    /// (virtual page, physical page or IO_PAGE), direct-mapped.
    xlate: Vec<(u32, u32)>,
}

impl Cpu {
    fn new(p: &Profile) -> Cpu {
        Cpu {
            c: Counters::default(),
            l1: Cache::new(p.l1d()),
            dtlb: Tlb::new(p.dtlb()),
            itlb: Tlb::new(p.itlb()),
            stlb: p.stlb().map(Tlb::new),
            last_ipage: NO_PAGE,
            last_dpage: NO_PAGE,
            last_line: u64::MAX,
            last_line_dirty: false,
            pending_arg: 0,
            invlpg_page: None,
            gdt: None,
            tss: None,
            idt: None,
            seq: [0; 2],
            xlate: vec![(NO_PAGE, 0); XLATE_ENTRIES],
        }
    }

    fn forget_translations(&mut self) {
        self.xlate.fill((NO_PAGE, 0));
        self.last_ipage = NO_PAGE;
        self.last_dpage = NO_PAGE;
    }
}

/// The whole model.
#[derive(Clone, Debug)]
pub struct Machine {
    profile: Profile,
    opts: Options,
    cpus: Vec<Cpu>,
    l2: Vec<Cache>,
    l3: Option<Cache>,
    /// The IDT last announced by any CPU (a CPU that announced none uses it).
    idt: Option<u32>,
    snaps: Vec<Snap>,
    line_shift: u32,
}

impl Machine {
    /// A machine of `ncpus` CPUs (more are added when they show up).
    pub fn new(profile: Profile, opts: Options, ncpus: usize) -> Result<Machine, String> {
        profile.check()?;
        let mut m = Machine {
            line_shift: profile.line.trailing_zeros(),
            l3: profile.l3().map(Cache::new),
            l2: Vec::new(),
            cpus: Vec::new(),
            idt: None,
            snaps: Vec::new(),
            profile,
            opts,
        };
        m.cpu(ncpus.max(1) - 1);
        Ok(m)
    }

    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    pub fn options(&self) -> Options {
        self.opts
    }

    pub fn ncpus(&self) -> usize {
        self.cpus.len()
    }

    pub fn counters(&self, cpu: usize) -> Counters {
        self.cpus.get(cpu).map(|c| c.c).unwrap_or_default()
    }

    pub fn snaps(&self) -> &[Snap] {
        &self.snaps
    }

    #[inline(always)]
    fn cpu(&mut self, cpu: usize) -> &mut Cpu {
        if cpu >= self.cpus.len() {
            self.grow(cpu);
        }
        &mut self.cpus[cpu]
    }

    #[cold]
    fn grow(&mut self, cpu: usize) {
        while self.cpus.len() <= cpu {
            self.cpus.push(Cpu::new(&self.profile));
            if self.l2.is_empty() || self.profile.l2_shared == 0 {
                self.l2.push(Cache::new(self.profile.l2()));
            }
        }
    }

    fn l2_of(&self, cpu: usize) -> usize {
        if self.profile.l2_shared == 1 {
            0
        } else {
            cpu
        }
    }

    /// Decodes the instruction at `vaddr` once, at translation time.
    pub fn decode(&self, bytes: &[u8], vaddr: u32) -> Insn {
        let decoded = classify(bytes);
        Insn {
            vaddr,
            decoded,
            cost: self.profile.insn_cost(decoded.class, self.opts.virt),
        }
    }

    fn is_global(&self, page: u32) -> bool {
        self.opts.pge && page < KERNEL_MAP_END >> PAGE_SHIFT
    }

    /// A TLB lookup of `page`; returns its cost (0 on a first-level hit).
    fn tlb(&mut self, cpu: usize, page: u32, instruction: bool) -> u64 {
        let global = self.is_global(page);
        let (stlb_latency, walk) = (self.profile.stlb_latency, self.profile.walk);
        let c = &mut self.cpus[cpu];
        let first = if instruction {
            &mut c.itlb
        } else {
            &mut c.dtlb
        };
        if first.lookup(page) {
            return 0;
        }
        first.fill(page, global);
        if let Some(s) = &mut c.stlb {
            if s.lookup(page) {
                return stlb_latency.into();
            }
            s.fill(page, global);
        }
        c.c.tlb_misses += 1;
        walk.into()
    }

    /// One cache line of a data access; returns its stall.
    fn line(&mut self, cpu: usize, line: u64, write: bool) -> u64 {
        let l2i = self.l2_of(cpu);
        let p = &self.profile;
        let c = &mut self.cpus[cpu];
        if line == c.last_line && (c.last_line_dirty || !write) {
            return 0;
        }
        c.last_line = line;
        c.last_line_dirty = write;
        if c.l1.lookup(line, write) != LineState::Invalid {
            return 0;
        }
        c.c.l1_misses += 1;
        let l2 = &mut self.l2[l2i];
        let latency = if l2.lookup(line, false) != LineState::Invalid {
            p.l2_latency
        } else {
            c.c.l2_misses += 1;
            let from = match &mut self.l3 {
                Some(l3) => {
                    if l3.lookup(line, false) != LineState::Invalid {
                        p.l3_latency
                    } else {
                        l3.fill(line, LineState::Exclusive);
                        p.mem_latency
                    }
                }
                None => p.mem_latency,
            };
            if p.pair_prefetch == 1 {
                // The other line(s) of the aligned 128-byte pair come too,
                // without a stall (NetBurst's sector, later CPUs' spatial
                // prefetcher); the demand line is filled after them, so it is
                // the most recently used.
                let per_pair = u64::from(PAIR_BYTES >> self.line_shift);
                let first = line & !(per_pair - 1);
                for buddy in (first..first + per_pair).filter(|&b| b != line) {
                    if l2.probe(buddy) == LineState::Invalid {
                        l2.fill(buddy, LineState::Exclusive);
                    }
                }
            }
            l2.fill(line, LineState::Exclusive);
            from
        };
        let state = if write {
            LineState::Modified
        } else {
            LineState::Exclusive
        };
        if let Some(ev) = c.l1.fill(line, state) {
            // A dirty line leaves L1 into L2 (write-back; the write-back
            // buffer hides its cost).
            if ev.state == LineState::Modified
                && l2.set_state(ev.line, LineState::Modified) == LineState::Invalid
            {
                l2.fill(ev.line, LineState::Modified);
            }
        }
        u64::from(latency - p.l1d_latency)
    }

    /// A data access of `size` bytes at virtual `vaddr`, physical `paddr`:
    /// the pages it touches go through the DTLB, the lines through the
    /// caches. (A page-crossing access is taken as physically contiguous.)
    pub fn data(&mut self, cpu: usize, vaddr: u32, paddr: u64, size: u32, write: bool) {
        self.cpu(cpu);
        let size = size.max(1);
        let end = vaddr.wrapping_add(size - 1);
        let page = vaddr >> PAGE_SHIFT;
        let mut stall = 0;
        if page != self.cpus[cpu].last_dpage {
            stall += self.tlb(cpu, page, false);
        }
        let last_page = end >> PAGE_SHIFT;
        if last_page != page {
            stall += self.tlb(cpu, last_page, false);
        }
        self.cpus[cpu].last_dpage = last_page;
        let first = paddr >> self.line_shift;
        let last = (paddr + u64::from(size) - 1) >> self.line_shift;
        for line in first..=last {
            stall += self.line(cpu, line, write);
        }
        self.cpus[cpu].c.cycles += stall;
    }

    /// A data access as the plugin sees it. The load after a marker that
    /// takes an argument is the argument, not an access. `translate` gives
    /// the physical address of `vaddr` (None: MMIO, not modelled); it is
    /// asked only for pages outside the kernel's identity map that this
    /// CPU has not translated since its last flush.
    pub fn mem(
        &mut self,
        cpu: usize,
        vaddr: u32,
        size: u32,
        write: bool,
        translate: impl FnOnce() -> Option<u64>,
    ) {
        let c = self.cpu(cpu);
        if c.pending_arg != 0 && !write {
            let id = std::mem::take(&mut c.pending_arg);
            self.argument(cpu, id, vaddr);
            return;
        }
        let paddr = if vaddr < KERNEL_MAP_END {
            // Identity-mapped in every address space (abi::layout).
            u64::from(vaddr)
        } else {
            let vpage = vaddr >> PAGE_SHIFT;
            let slot = vpage as usize % XLATE_ENTRIES;
            let (tag, ppage) = c.xlate[slot];
            let ppage = if tag == vpage {
                ppage
            } else {
                let ppage = translate().map_or(IO_PAGE, |p| (p >> PAGE_SHIFT) as u32);
                c.xlate[slot] = (vpage, ppage);
                ppage
            };
            if ppage == IO_PAGE {
                return;
            }
            u64::from(ppage) << PAGE_SHIFT | u64::from(vaddr & (PAGE_SIZE - 1))
        };
        self.data(cpu, vaddr, paddr, size, write);
    }

    fn argument(&mut self, cpu: usize, id: u16, value: u32) {
        let c = &mut self.cpus[cpu];
        match id {
            ANNOUNCE_IDT => {
                c.idt = Some(value);
                self.idt = Some(value);
            }
            ANNOUNCE_GDT => c.gdt = Some(value),
            ANNOUNCE_TSS => c.tss = Some(value),
            INVLPG_PAGE if (ARG_WINDOW..ARG_WINDOW + ARG_WINDOW_SIZE).contains(&value) => {
                c.invlpg_page = Some(value - ARG_WINDOW)
            }
            _ => {}
        }
    }

    /// An instruction executes on `cpu` (before its data accesses).
    pub fn exec(&mut self, cpu: usize, insn: &Insn) {
        let c = self.cpu(cpu);
        c.c.insns += 1;
        if insn.decoded.class == Class::Marker {
            self.marker(cpu, insn.decoded.marker);
            return;
        }
        c.c.cycles += u64::from(insn.cost);
        let page = insn.vaddr >> PAGE_SHIFT;
        if page != c.last_ipage {
            let cost = self.tlb(cpu, page, true);
            let c = &mut self.cpus[cpu];
            c.cycles_add(cost);
            c.last_ipage = page;
        }
        let c = &mut self.cpus[cpu];
        match insn.decoded.class {
            Class::MovCr3 => {
                c.c.tlb_flushes += 1;
                c.dtlb.flush_non_global();
                c.itlb.flush_non_global();
                if let Some(s) = &mut c.stlb {
                    s.flush_non_global();
                }
                c.forget_translations();
            }
            Class::MovCrPaging => {
                // CR0.PG or CR4.PGE may have changed (the value is unseen):
                // everything goes (SDM Vol. 3A §4.10.4.1).
                c.c.tlb_flushes += 1;
                c.dtlb.flush_all();
                c.itlb.flush_all();
                if let Some(s) = &mut c.stlb {
                    s.flush_all();
                }
                c.forget_translations();
            }
            Class::Invlpg => {
                c.c.tlb_flushes += 1;
                if let Some(page) = c.invlpg_page.take() {
                    c.dtlb.flush_page(page);
                    c.itlb.flush_page(page);
                    if let Some(s) = &mut c.stlb {
                        s.flush_page(page);
                    }
                }
                // The operand is unseen, so every cached translation goes.
                c.forget_translations();
            }
            Class::IntN => {
                let from_user = insn.vaddr >= USER_BASE;
                self.deliver(cpu, insn.decoded.vector, from_user);
            }
            _ => {}
        }
    }

    fn marker(&mut self, cpu: usize, id: u16) {
        let c = &mut self.cpus[cpu];
        let stream = match id {
            SNAP_USER => 0,
            SNAP_KERNEL => 1,
            _ => {
                if abi::model::takes_arg(id) {
                    c.pending_arg = id;
                }
                return;
            }
        };
        let seq = c.seq[stream];
        c.seq[stream] += 1;
        self.snaps.push(Snap {
            cpu,
            stream: id,
            seq,
            counters: c.c,
        });
    }

    /// The reads of a software interrupt's delivery (SDM Vol. 3A §6.12.1):
    /// the IDT entry, the handler's code descriptor and, on a privilege
    /// change, the TSS's ring-0 stack and its data descriptor. Tables live
    /// in the kernel's identity map.
    fn deliver(&mut self, cpu: usize, vector: u8, from_user: bool) {
        let c = &self.cpus[cpu];
        let (idt, gdt, tss) = (c.idt.or(self.idt), c.gdt, c.tss);
        let mut reads: Vec<(u32, u32)> = Vec::with_capacity(4);
        if let Some(idt) = idt {
            reads.push((idt + DESCRIPTOR_BYTES * u32::from(vector), DESCRIPTOR_BYTES));
        }
        if let Some(gdt) = gdt {
            reads.push((
                gdt + descriptor_offset(selector::KERNEL_CODE),
                DESCRIPTOR_BYTES,
            ));
            if from_user {
                reads.push((
                    gdt + descriptor_offset(selector::KERNEL_DATA),
                    DESCRIPTOR_BYTES,
                ));
            }
        }
        if let (true, Some(tss)) = (from_user, tss) {
            reads.push((tss + TSS_ESP0_OFFSET, TSS_ESP0_SS0_BYTES));
        }
        for (addr, size) in reads {
            if addr < KERNEL_MAP_END {
                self.data(cpu, addr, u64::from(addr), size, false);
            }
        }
    }

    /// The snapshot file (format: `abi::model`).
    pub fn report(&self, ncpus: usize) -> String {
        let p = &self.profile;
        let mut out = format!(
            "model1 profile={} virt={} ncpus={}\nparam",
            p.name,
            u8::from(self.opts.virt),
            ncpus.max(self.cpus.len())
        );
        for (k, v) in p.params() {
            out.push_str(&format!(" {k}={v}"));
        }
        out.push_str(&format!(" pge={}\n", u8::from(self.opts.pge)));
        for s in &self.snaps {
            let c = &s.counters;
            out.push_str(&format!(
                "snap cpu={} stream={} seq={} insns={} cycles={} l1_misses={} l2_misses={} tlb_misses={} tlb_flushes={} coherence_misses={} invalidations={} transfers={}\n",
                s.cpu, s.stream, s.seq, c.insns, c.cycles, c.l1_misses, c.l2_misses,
                c.tlb_misses, c.tlb_flushes, c.coherence_misses, c.invalidations, c.transfers
            ));
        }
        out.push_str("end\n");
        out
    }
}

impl Cpu {
    fn cycles_add(&mut self, n: u64) {
        self.c.cycles += n;
    }
}

/// Byte offset of a selector's descriptor in its table.
fn descriptor_offset(sel: u16) -> u32 {
    u32::from(sel & !7)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::parse;
    use abi::model::marker_disp;

    /// A small machine with round numbers: 64-byte lines; L1D 256 B, 2-way
    /// (2 sets); L2 1 KiB, 4-way (4 sets); latencies 2 / 12 / 102, so an
    /// L2 hit stalls 10 and a memory access 100; TLBs of 4 entries; a walk
    /// costs 30; every extra is its own number.
    const TEST_PROFILE: &str = "
[t]
description = \"test\"
line = 64
l1d_size = 256
l1d_ways = 2
l1d_latency = 2
l2_size = 1024
l2_ways = 4
l2_latency = 12
l2_shared = 0
l3_size = 0
l3_ways = 1
l3_latency = 0
mem_latency = 102
pair_prefetch = 0
dtlb_entries = 4
dtlb_ways = 4
itlb_entries = 4
itlb_ways = 4
stlb_entries = 0
stlb_ways = 1
stlb_latency = 0
walk = 30
base = 1
int_n = 100
iret = 2
sysenter = 3
sysexit = 4
syscall = 5
sysret = 6
lcall_gate = 7
lret_far = 8
mov_cr3 = 50
invlpg = 40
wrmsr = 9
rdmsr = 10
cpuid = 11
rdtsc = 12
lfence = 13
popf = 14
sreg_load = 15
locked = 16
vmexit = 1000
";

    fn profile(edit: &[(&str, &str)]) -> Profile {
        let mut text = TEST_PROFILE.to_string();
        for (key, value) in edit {
            let from = text
                .lines()
                .find(|l| l.starts_with(&format!("{key} =")))
                .unwrap()
                .to_string();
            text = text.replace(&from, &format!("{key} = {value}"));
        }
        parse(&text).unwrap().remove(0)
    }

    fn machine(edit: &[(&str, &str)], opts: Options) -> Machine {
        Machine::new(profile(edit), opts, 1).unwrap()
    }

    /// A load at kernel (identity-mapped) address `a`.
    fn load(m: &mut Machine, a: u32, size: u32) {
        m.mem(0, a, size, false, || unreachable!("identity-mapped"));
    }

    fn exec(m: &mut Machine, bytes: &[u8], vaddr: u32) {
        let i = m.decode(bytes, vaddr);
        m.exec(0, &i);
    }

    fn marker(id: u16) -> [u8; 7] {
        let d = marker_disp(id).to_le_bytes();
        [0x0f, 0x1f, 0x80, d[0], d[1], d[2], d[3]]
    }

    const NOP: [u8; 1] = [0x90];
    const KERNEL_PAGE: u32 = 0x0010_0000;

    #[test]
    fn working_set_within_l1_misses_only_cold() {
        let mut m = machine(&[], Options::default());
        // 4 lines = 256 B = L1D; all in one page, so one DTLB walk.
        for round in 0..3 {
            for l in 0..4 {
                load(&mut m, KERNEL_PAGE + 64 * l, 4);
            }
            let c = m.counters(0);
            assert_eq!((c.l1_misses, c.l2_misses), (4, 4), "round {round}");
        }
        assert_eq!(m.counters(0).tlb_misses, 1);
        assert_eq!(m.counters(0).cycles, 4 * 100 + 30);
    }

    #[test]
    fn working_set_between_l1_and_l2_misses_l1_every_time() {
        let mut m = machine(&[], Options::default());
        // 8 lines = 512 B: twice L1D, half L2. Cycling through them, LRU
        // evicts each line of L1 before its next use; L2 keeps them all.
        for _ in 0..5 {
            for l in 0..8 {
                load(&mut m, KERNEL_PAGE + 64 * l, 4);
            }
        }
        let c = m.counters(0);
        assert_eq!(c.l1_misses, 40);
        assert_eq!(c.l2_misses, 8);
        assert_eq!(c.cycles, 8 * 100 + 32 * 10 + 30);
    }

    #[test]
    fn working_set_beyond_l2_misses_both() {
        let mut m = machine(&[], Options::default());
        // 32 lines = 2 KiB, twice L2: every access misses both levels.
        for _ in 0..3 {
            for l in 0..32 {
                load(&mut m, KERNEL_PAGE + 64 * l, 4);
            }
        }
        let c = m.counters(0);
        assert_eq!((c.l1_misses, c.l2_misses), (96, 96));
    }

    #[test]
    fn line_crossing_access_touches_both_lines() {
        let mut m = machine(&[], Options::default());
        load(&mut m, KERNEL_PAGE + 62, 4);
        assert_eq!(m.counters(0).l1_misses, 2);
        load(&mut m, KERNEL_PAGE + 64, 4);
        load(&mut m, KERNEL_PAGE + 60, 4);
        assert_eq!(m.counters(0).l1_misses, 2);
    }

    #[test]
    fn pair_prefetch_brings_the_buddy_into_l2() {
        let mut off = machine(&[], Options::default());
        let mut on = machine(&[("pair_prefetch", "1")], Options::default());
        for m in [&mut off, &mut on] {
            load(m, KERNEL_PAGE + 64, 4); // line 1 of pair 0
            load(m, KERNEL_PAGE, 4); // line 0: its buddy
            load(m, KERNEL_PAGE + 128, 4); // pair 1
        }
        assert_eq!(off.counters(0).l2_misses, 3);
        // The buddy hits in L2 (an L1 miss still: the pair fills L2 only).
        assert_eq!(on.counters(0).l2_misses, 2);
        assert_eq!(on.counters(0).l1_misses, 3);
        assert_eq!(off.counters(0).cycles - on.counters(0).cycles, 100 - 10);
    }

    #[test]
    fn cr3_write_flushes_the_tlb_and_pge_keeps_kernel_pages() {
        let mov_cr3 = [0x0f, 0x22, 0xd8];
        for pge in [false, true] {
            let mut m = machine(&[], Options { virt: false, pge });
            load(&mut m, KERNEL_PAGE, 4);
            exec(&mut m, &mov_cr3, KERNEL_PAGE);
            load(&mut m, KERNEL_PAGE, 4);
            let c = m.counters(0);
            assert_eq!(c.tlb_flushes, 1);
            // Data walks: the first load, and after the flush unless global;
            // instruction walks: the mov's page, before the flush.
            let expect = if pge { 2 } else { 3 };
            assert_eq!(c.tlb_misses, expect, "pge={pge}");
        }
    }

    #[test]
    fn invlpg_drops_the_announced_page_only() {
        let mut m = machine(&[], Options::default());
        let (a, b) = (KERNEL_PAGE, KERNEL_PAGE + 0x1000);
        load(&mut m, a, 4);
        load(&mut m, b, 4);
        let code = KERNEL_PAGE + 0x8000;
        exec(&mut m, &marker(INVLPG_PAGE), code);
        // The argument load: not an access, not charged.
        let before = m.counters(0);
        load(&mut m, ARG_WINDOW + (b >> PAGE_SHIFT), 4);
        assert_eq!(m.counters(0).cycles, before.cycles);
        assert_eq!(m.counters(0).l1_misses, before.l1_misses);
        exec(&mut m, &[0x0f, 0x01, 0x38], code);
        let c0 = m.counters(0);
        load(&mut m, a, 4);
        assert_eq!(m.counters(0).tlb_misses, c0.tlb_misses);
        load(&mut m, b, 4);
        assert_eq!(m.counters(0).tlb_misses, c0.tlb_misses + 1);
        assert_eq!(c0.tlb_flushes, 1);
    }

    #[test]
    fn itlb_walks_once_per_page() {
        let mut m = machine(&[], Options::default());
        for i in 0..10 {
            exec(&mut m, &NOP, KERNEL_PAGE + i);
        }
        exec(&mut m, &NOP, KERNEL_PAGE + 0x1000);
        exec(&mut m, &NOP, KERNEL_PAGE);
        let c = m.counters(0);
        assert_eq!((c.insns, c.tlb_misses), (12, 2));
        assert_eq!(c.cycles, 12 + 2 * 30);
    }

    #[test]
    fn int_n_reads_idt_gdt_and_tss_from_user_mode() {
        let mut m = machine(&[], Options::default());
        let code = KERNEL_PAGE + 0x8000;
        let (idt, gdt, tss) = (0x0020_0000, 0x0020_1000, 0x0020_2000);
        for (id, addr) in [
            (ANNOUNCE_IDT, idt),
            (ANNOUNCE_GDT, gdt),
            (ANNOUNCE_TSS, tss),
        ] {
            exec(&mut m, &marker(id), code);
            load(&mut m, addr, 4);
        }
        assert_eq!(m.counters(0).l1_misses, 0);
        let warm = m.counters(0);
        exec(&mut m, &[0xcd, 0x80], USER_BASE);
        let c = m.counters(0);
        // IDT entry 0x80, the two kernel descriptors (one line: 0x08, 0x10),
        // the TSS: three cold lines in three pages.
        assert_eq!(c.l1_misses - warm.l1_misses, 3);
        assert_eq!(c.tlb_misses - warm.tlb_misses, 1 + 3); // the user code page too
        assert_eq!(c.cycles - warm.cycles, 1 + 100 + 3 * 100 + 4 * 30);
        // From ring 0 the TSS and the data descriptor are not read.
        let mut k = machine(&[], Options::default());
        exec(&mut k, &marker(ANNOUNCE_IDT), code);
        load(&mut k, idt, 4);
        exec(&mut k, &[0xcd, 0x80], code);
        assert_eq!(k.counters(0).l1_misses, 1);
    }

    #[test]
    fn virt_adds_the_vm_exit_to_cr3_writes() {
        let mut m = machine(
            &[],
            Options {
                virt: true,
                pge: false,
            },
        );
        exec(&mut m, &[0x0f, 0x22, 0xd8], KERNEL_PAGE);
        assert_eq!(m.counters(0).cycles, 1 + 50 + 1000 + 30);
        exec(&mut m, &[0x0f, 0x34], KERNEL_PAGE); // sysenter: no VM exit
        assert_eq!(m.counters(0).cycles, 1 + 50 + 1000 + 30 + 1 + 3 + 30);
    }

    #[test]
    fn snapshots_count_per_stream_and_markers_cost_nothing() {
        let mut m = machine(&[], Options::default());
        let code = KERNEL_PAGE;
        exec(&mut m, &marker(SNAP_USER), code);
        exec(&mut m, &NOP, code);
        exec(&mut m, &marker(SNAP_KERNEL), code);
        exec(&mut m, &marker(SNAP_USER), code);
        let s = m.snaps();
        assert_eq!(s.len(), 3);
        assert_eq!(
            (s[0].stream, s[0].seq, s[0].counters.insns),
            (SNAP_USER, 0, 1)
        );
        assert_eq!((s[1].stream, s[1].seq), (SNAP_KERNEL, 0));
        assert_eq!(
            (s[2].stream, s[2].seq, s[2].counters.insns),
            (SNAP_USER, 1, 4)
        );
        // Only the NOP is charged (plus its ITLB walk).
        assert_eq!(s[2].counters.cycles, 1 + 30);
        let r = m.report(1);
        let lines: Vec<&str> = r.lines().collect();
        assert_eq!(lines[0], "model1 profile=t virt=0 ncpus=1");
        assert!(lines[1].starts_with("param line=64 l1d_size=256 "));
        assert!(lines[1].ends_with(" vmexit=1000 pge=0"));
        assert_eq!(
            lines[4],
            "snap cpu=0 stream=1 seq=1 insns=4 cycles=31 l1_misses=0 l2_misses=0 tlb_misses=1 tlb_flushes=0 coherence_misses=0 invalidations=0 transfers=0"
        );
        assert_eq!(lines[5], "end");
    }

    #[test]
    fn user_pages_are_translated_once_until_a_flush() {
        let mut m = machine(&[], Options::default());
        let mut asked = 0;
        for _ in 0..3 {
            m.mem(0, USER_BASE + 8, 4, false, || {
                asked += 1;
                Some(0x0030_0008)
            });
        }
        assert_eq!(asked, 1);
        exec(&mut m, &[0x0f, 0x22, 0xd8], KERNEL_PAGE);
        m.mem(0, USER_BASE + 8, 4, true, || {
            asked += 1;
            Some(0x0030_0008)
        });
        assert_eq!(asked, 2);
        // MMIO is neither cached nor charged.
        let before = m.counters(0);
        m.mem(0, 0xfee0_0030, 4, false, || None);
        assert_eq!(m.counters(0), before);
    }

    #[test]
    fn shared_l2_is_one_cache_for_all_cpus() {
        let mut m = Machine::new(profile(&[("l2_shared", "1")]), Options::default(), 2).unwrap();
        m.data(0, KERNEL_PAGE, u64::from(KERNEL_PAGE), 4, false);
        m.data(1, KERNEL_PAGE, u64::from(KERNEL_PAGE), 4, false);
        assert_eq!(m.counters(0).l2_misses, 1);
        assert_eq!((m.counters(1).l1_misses, m.counters(1).l2_misses), (1, 0));
        let mut p = Machine::new(profile(&[]), Options::default(), 2).unwrap();
        p.data(0, KERNEL_PAGE, u64::from(KERNEL_PAGE), 4, false);
        p.data(1, KERNEL_PAGE, u64::from(KERNEL_PAGE), 4, false);
        assert_eq!(p.counters(1).l2_misses, 1);
    }
}
