//! The GDT and the TSSs (Intel SDM Vol. 3A §3.4.5, §7.2).
//!
//! Descriptors are built by typed constructors and added in order; each add
//! returns the selector, and boot checks it against the one `abi` names, so a
//! selector is never computed by hand in two places.

use core::arch::asm;
use core::mem::size_of;

use abi::layout::selector;

use crate::sync::cell::BootCell;

/// A 32-bit task-state segment (SDM Vol. 3A §7.2.1, Figure 7-2).
#[derive(Clone, Copy, Default)]
#[repr(C)]
pub struct Tss {
    pub link: u32,
    pub esp0: u32,
    pub ss0: u32,
    pub esp1: u32,
    pub ss1: u32,
    pub esp2: u32,
    pub ss2: u32,
    pub cr3: u32,
    pub eip: u32,
    pub eflags: u32,
    pub eax: u32,
    pub ecx: u32,
    pub edx: u32,
    pub ebx: u32,
    pub esp: u32,
    pub ebp: u32,
    pub esi: u32,
    pub edi: u32,
    pub es: u32,
    pub cs: u32,
    pub ss: u32,
    pub ds: u32,
    pub fs: u32,
    pub gs: u32,
    pub ldt: u32,
    pub trap: u16,
    /// Offset of the I/O permission bitmap. Set past the TSS limit: no
    /// bitmap, so ring 3 (IOPL 0) gets #GP on every in/out.
    pub iomap_base: u16,
}

/// A TSS with every field zero (`Default` is not const).
const EMPTY_TSS: Tss = Tss {
    link: 0,
    esp0: 0,
    ss0: 0,
    esp1: 0,
    ss1: 0,
    esp2: 0,
    ss2: 0,
    cr3: 0,
    eip: 0,
    eflags: 0,
    eax: 0,
    ecx: 0,
    edx: 0,
    ebx: 0,
    esp: 0,
    ebp: 0,
    esi: 0,
    edi: 0,
    es: 0,
    cs: 0,
    ss: 0,
    ds: 0,
    fs: 0,
    gs: 0,
    ldt: 0,
    trap: 0,
    iomap_base: 0,
};

/// A segment or gate descriptor (8 bytes).
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(transparent)]
pub struct Descriptor(u64);

/// Access-byte bits (SDM Vol. 3A §3.4.5, Figure 3-8).
const PRESENT: u64 = 1 << 47;
const CODE_OR_DATA: u64 = 1 << 44;
const EXECUTABLE: u64 = 1 << 43;
const RW: u64 = 1 << 41;
/// Flags nibble: 4 KiB granularity, 32-bit default size.
const G_AND_DB: u64 = 0b1100 << 52;
/// System-descriptor types (SDM Vol. 3A Table 3-2).
const TYPE_TSS_AVAILABLE: u64 = 0x9 << 40;
const TYPE_CALL_GATE: u64 = 0xC << 40;

const fn dpl(ring: u8) -> u64 {
    (ring as u64 & 3) << 45
}

impl Descriptor {
    const NULL: Descriptor = Descriptor(0);

    /// Base 0, limit 4 GiB: the flat model.
    const fn flat(kind: u64, ring: u8) -> Descriptor {
        let limit = 0xF_FFFF;
        Descriptor(
            (limit & 0xFFFF)
                | ((limit >> 16) << 48)
                | G_AND_DB
                | PRESENT
                | CODE_OR_DATA
                | dpl(ring)
                | kind,
        )
    }

    pub const fn code(ring: u8) -> Descriptor {
        Self::flat(EXECUTABLE | RW, ring)
    }

    pub const fn data(ring: u8) -> Descriptor {
        Self::flat(RW, ring)
    }

    /// A ring-0 data segment of `len` bytes at `base` (byte granularity):
    /// the per-CPU segment, reached through GS.
    pub fn data_at(base: u32, len: u32) -> Descriptor {
        let (b, l) = (base as u64, (len - 1) as u64 & 0xF_FFFF);
        Descriptor(
            (l & 0xFFFF)
                | ((b & 0xFF_FFFF) << 16)
                | PRESENT
                | CODE_OR_DATA
                | RW
                | ((l >> 16) << 48)
                | (0b0100 << 52)
                | ((b >> 24) << 56),
        )
    }

    /// An available 32-bit TSS. Takes `&'static` because the CPU keeps the
    /// address for as long as the descriptor can be loaded.
    pub fn tss(tss: &'static Tss) -> Descriptor {
        let base = tss as *const Tss as u64;
        let limit = size_of::<Tss>() as u64 - 1;
        Descriptor(
            (limit & 0xFFFF)
                | ((base & 0xFF_FFFF) << 16)
                | TYPE_TSS_AVAILABLE
                | PRESENT
                | ((base >> 24) << 56),
        )
    }

    /// A 32-bit call gate of privilege `ring` to `target` in `code_selector`,
    /// copying no parameters (SDM Vol. 3A §5.8.3, Figure 5-8).
    pub fn call_gate(code_selector: u16, target: u32, ring: u8) -> Descriptor {
        let t = target as u64;
        Descriptor(
            (t & 0xFFFF)
                | ((code_selector as u64) << 16)
                | TYPE_CALL_GATE
                | dpl(ring)
                | PRESENT
                | ((t >> 16) << 48),
        )
    }
}

const ENTRIES: usize = selector::END as usize / 8;

/// The table and how many descriptors it holds.
pub struct Gdt {
    table: [Descriptor; ENTRIES],
    len: usize,
}

impl Gdt {
    const fn new() -> Gdt {
        Gdt {
            table: [Descriptor::NULL; ENTRIES],
            len: 1,
        }
    }

    /// Appends `d` and returns its selector with requested privilege `rpl`.
    fn add(&mut self, d: Descriptor, rpl: u16) -> u16 {
        let index = self.len;
        self.table[index] = d;
        self.len += 1;
        (index as u16) << 3 | rpl
    }

    /// `lgdt`. Takes `&'static self`: the CPU reads the table after this returns.
    fn load(&'static self) {
        #[repr(C, packed)]
        struct Pointer {
            limit: u16,
            base: u32,
        }
        let p = Pointer {
            limit: (self.len * 8 - 1) as u16,
            base: self.table.as_ptr() as u32,
        };
        // SAFETY: the table is 'static and its first entries are the flat
        // segments the CPU already uses; the reloads below make the new
        // descriptors live (SDM Vol. 3A §3.4.3).
        unsafe {
            asm!(
                "lgdt ({p})",
                "ljmp ${kcode}, $2f",
                "2:",
                "movw ${kdata}, {t:x}",
                "movw {t:x}, %ds",
                "movw {t:x}, %es",
                "movw {t:x}, %ss",
                "movw {t:x}, %fs",
                "movw {t:x}, %gs",
                p = in(reg) &p,
                t = out(reg) _,
                kcode = const selector::KERNEL_CODE,
                kdata = const selector::KERNEL_DATA,
                options(att_syntax)
            );
        }
    }
}

// GDT and TSSs: statics, since the CPU keeps their addresses for good.
static GDT: BootCell<Gdt> = BootCell::new(Gdt::new());
static TSS: BootCell<Tss> = BootCell::new(EMPTY_TSS);
static DF_TSS: BootCell<Tss> = BootCell::new(EMPTY_TSS);
static DB_TSS: BootCell<Tss> = BootCell::new(EMPTY_TSS);

/// The application processors' TSSs (ESP0 = each one's stack).
static AP_TSS: BootCell<[Tss; abi::layout::MAX_CPUS - 1]> =
    BootCell::new([EMPTY_TSS; abi::layout::MAX_CPUS - 1]);
/// The application processors' own double-fault and debug TSSs.
static AP_DF_TSS: BootCell<[Tss; abi::layout::MAX_CPUS - 1]> =
    BootCell::new([EMPTY_TSS; abi::layout::MAX_CPUS - 1]);
static AP_DB_TSS: BootCell<[Tss; abi::layout::MAX_CPUS - 1]> =
    BootCell::new([EMPTY_TSS; abi::layout::MAX_CPUS - 1]);

/// Adds the per-CPU descriptors: each AP's TSS, each CPU's GS segment
/// (`percpu[i]` = (base, length)), then each AP's double-fault and debug
/// TSSs (`handlers[cpu]`). Before `load`.
fn add_percpu(
    gdt: &mut Gdt,
    percpu: &[(u32, u32); abi::layout::MAX_CPUS],
    handlers: &[HandlerTasks; abi::layout::MAX_CPUS],
) {
    // SAFETY: boot, single CPU; the TSSs are statics the CPU keeps.
    let tsss = unsafe { AP_TSS.get_mut() };
    for (i, t) in tsss.iter_mut().enumerate() {
        t.ss0 = selector::KERNEL_DATA as u32;
        t.iomap_base = size_of::<Tss>() as u16;
        // A task switch back from a handler task loads CR3 from here (the
        // CPU never saves CR3 into a TSS, SDM Vol. 3A §7.2.1): the one
        // page directory, as in the main TSS.
        t.cr3 = handlers[i + 1].df.cr3;
        // SAFETY: a static, alive for good.
        let r: &'static Tss = unsafe { &*(t as *const Tss) };
        let want = selector::AP_TSS_BASE + 8 * i as u16;
        expect(gdt.add(Descriptor::tss(r), 0), want, "AP TSS");
    }
    for (i, &(base, len)) in percpu.iter().enumerate() {
        let want = selector::PERCPU_BASE + 8 * i as u16;
        expect(
            gdt.add(Descriptor::data_at(base, len), 0),
            want,
            "per-CPU segment",
        );
    }
    for (statics, base, what) in [
        (&AP_DF_TSS, selector::AP_DF_TSS_BASE, "AP double-fault TSS"),
        (&AP_DB_TSS, selector::AP_DB_TSS_BASE, "AP debug TSS"),
    ] {
        // SAFETY: boot, single CPU; the TSSs are statics the CPU keeps.
        let tsss = unsafe { statics.get_mut() };
        for (i, t) in tsss.iter_mut().enumerate() {
            let h = &handlers[i + 1];
            *t = handler_tss(if base == selector::AP_DF_TSS_BASE {
                &h.df
            } else {
                &h.db
            });
            // SAFETY: a static, alive for good.
            let r: &'static Tss = unsafe { &*(t as *const Tss) };
            expect(gdt.add(Descriptor::tss(r), 0), base + 8 * i as u16, what);
        }
    }
}

/// Sets AP `cpu`'s ESP0 (cpu >= 1).
pub fn set_ap_esp0(cpu: usize, top: u32) {
    // SAFETY: before that AP starts; nothing else reads its TSS.
    unsafe { AP_TSS.get_mut()[cpu - 1].esp0 = top };
}

fn expect(got: u16, want: u16, what: &str) {
    assert!(got == want, "GDT: {what} at {got:#x}, abi says {want:#x}");
}

/// Where a handler task (double fault, debug) starts.
pub struct HandlerTask {
    pub eip: u32,
    pub esp: u32,
    pub cr3: u32,
}

/// One CPU's two handler tasks, each on a stack of its own.
pub struct HandlerTasks {
    pub df: HandlerTask,
    pub db: HandlerTask,
}

/// A handler task's TSS: it starts fresh each time it is entered through
/// its task gate, on its own stack, with kernel segments and interrupts
/// off (SDM Vol. 3A §7.3, §6.15 Interrupt 8).
fn handler_tss(t: &HandlerTask) -> Tss {
    Tss {
        esp0: t.esp,
        ss0: selector::KERNEL_DATA as u32,
        cr3: t.cr3,
        eip: t.eip,
        eflags: abi::eflags::RESERVED_1,
        esp: t.esp,
        cs: selector::KERNEL_CODE as u32,
        ss: selector::KERNEL_DATA as u32,
        ds: selector::KERNEL_DATA as u32,
        es: selector::KERNEL_DATA as u32,
        fs: selector::KERNEL_DATA as u32,
        gs: selector::KERNEL_DATA as u32,
        iomap_base: size_of::<Tss>() as u16,
        ..EMPTY_TSS
    }
}

/// Builds and loads the GDT, the main TSS (ESP0 = `kernel_stack_top`) and
/// every CPU's double-fault and debug TSSs (`handlers`, by CPU), then
/// loads TR.
pub fn init(
    kernel_stack_top: u32,
    handlers: &[HandlerTasks; abi::layout::MAX_CPUS],
    gate: u32,
    gate_floor: u32,
    percpu: &[(u32, u32); abi::layout::MAX_CPUS],
) {
    // SAFETY: boot, single CPU; nothing else references these statics yet.
    let (gdt, tss, df_tss) = unsafe { (GDT.get_mut(), TSS.get_mut(), DF_TSS.get_mut()) };
    let no_iomap = size_of::<Tss>() as u16;
    tss.esp0 = kernel_stack_top;
    tss.ss0 = selector::KERNEL_DATA as u32;
    tss.iomap_base = no_iomap;
    tss.cr3 = handlers[0].df.cr3;
    *df_tss = handler_tss(&handlers[0].df);
    // SAFETY: boot, single CPU.
    unsafe { *DB_TSS.get_mut() = handler_tss(&handlers[0].db) };

    // SAFETY: the TSS statics live forever.
    let (tss_ref, df_ref, db_ref): (&'static Tss, &'static Tss, &'static Tss) =
        unsafe { (&*TSS.as_ptr(), &*DF_TSS.as_ptr(), &*DB_TSS.as_ptr()) };
    expect(
        gdt.add(Descriptor::code(0), 0),
        selector::KERNEL_CODE,
        "kernel code",
    );
    expect(
        gdt.add(Descriptor::data(0), 0),
        selector::KERNEL_DATA,
        "kernel data",
    );
    let user_code = |gdt: &mut Gdt| {
        expect(
            gdt.add(Descriptor::code(3), 3),
            selector::USER_CODE,
            "user code",
        )
    };
    let user_data = |gdt: &mut Gdt| {
        expect(
            gdt.add(Descriptor::data(3), 3),
            selector::USER_DATA,
            "user data",
        )
    };
    if cfg!(feature = "test-gdt-order") {
        // The two lines swapped, as a slip would: the check above must stop
        // the boot here (docs/booting.md; `cargo xtask test` boots it).
        user_data(gdt);
        user_code(gdt);
    } else {
        user_code(gdt);
        user_data(gdt);
    }
    expect(gdt.add(Descriptor::tss(tss_ref), 0), selector::TSS, "TSS");
    expect(
        gdt.add(Descriptor::tss(df_ref), 0),
        selector::DOUBLE_FAULT_TSS,
        "double-fault TSS",
    );
    let kcode = selector::KERNEL_CODE;
    expect(
        gdt.add(Descriptor::call_gate(kcode, gate, 3), 3),
        selector::CALL_GATE,
        "call gate",
    );
    expect(
        gdt.add(Descriptor::call_gate(kcode, gate_floor, 3), 3),
        selector::CALL_GATE_FLOOR,
        "floor call gate",
    );
    expect(
        gdt.add(Descriptor::tss(db_ref), 0),
        selector::DEBUG_TSS,
        "debug TSS",
    );
    add_percpu(gdt, percpu, handlers);
    // SAFETY: GDT is a static; only its address escapes to the CPU.
    let gdt: &'static Gdt = unsafe { &*GDT.as_ptr() };
    gdt.load();
    // SAFETY: the per-CPU segment of CPU 0 was just added.
    unsafe {
        asm!("movw {s:x}, %gs", s = in(reg) selector::PERCPU_BASE, options(att_syntax, nostack))
    };
    // SAFETY: the TSS descriptor was just loaded and is available (not busy).
    unsafe { load_tr(selector::TSS) };
}

/// `ltr` (SDM Vol. 3A §7.2.4), the `x86` crate's.
///
/// # Safety
/// `sel` must name an available (not busy) TSS descriptor of the loaded GDT.
unsafe fn load_tr(sel: u16) {
    // SAFETY: the caller's contract.
    unsafe { x86::task::load_tr(x86::segmentation::SegmentSelector::from_raw(sel)) }
}

/// The raw descriptor `selector` names (for traces).
pub fn raw(selector: u16) -> u64 {
    // SAFETY: a read of a table written only during boot.
    unsafe { GDT.get_mut().table[(selector >> 3) as usize].0 }
}

/// Sets CPU `cpu`'s TSS.ESP0: the stack its next ring-3 → ring-0
/// transition uses. Called by that CPU (the scheduler, switching threads).
pub fn set_esp0_on(cpu: usize, top: u32) {
    // SAFETY: each CPU writes only its own TSS, and reads ESP0 only on a
    // ring change, not now (the caller runs in ring 0 with IF clear).
    unsafe { tss_of(cpu, TssKind::Main).esp0 = top };
}

/// Sets the CR3 field of CPU `cpu`'s TSSs to `dir`, the address space its
/// CR3 now holds. A task switch loads CR3 from the incoming TSS and never
/// saves it into the outgoing one (SDM Vol. 3A §7.3), so the return from a
/// handler task (#DB, #DF) to the main task loads the main TSS's field:
/// it must name the running process's directory. Called by that CPU with
/// IF clear, in its main task.
pub fn set_cr3_on(cpu: usize, dir: u32) {
    for kind in [TssKind::Main, TssKind::DoubleFault, TssKind::Debug] {
        // SAFETY: this CPU's own TSSs; the handler tasks are suspended (we
        // run in the main task), and the main task's CR3 field is read
        // only on a switch back to it, not while it runs.
        unsafe { tss_of(cpu, kind).cr3 = dir };
    }
}

/// CPU `cpu`'s own TSS of the given kind (main, double fault, debug).
///
/// # Safety
/// The caller keeps to what the CPU does with it: a task's TSS is the
/// CPU's while that task runs, and written by software only while it is
/// suspended (or, for ESP0, while no ring change can read it).
unsafe fn tss_of(cpu: usize, kind: TssKind) -> &'static mut Tss {
    // SAFETY: statics alive for good; the caller's contract.
    unsafe {
        match (cpu, kind) {
            (0, TssKind::Main) => TSS.get_mut(),
            (0, TssKind::DoubleFault) => DF_TSS.get_mut(),
            (0, TssKind::Debug) => DB_TSS.get_mut(),
            (c, TssKind::Main) => &mut AP_TSS.get_mut()[c - 1],
            (c, TssKind::DoubleFault) => &mut AP_DF_TSS.get_mut()[c - 1],
            (c, TssKind::Debug) => &mut AP_DB_TSS.get_mut()[c - 1],
        }
    }
}

#[derive(Clone, Copy)]
enum TssKind {
    Main,
    DoubleFault,
    Debug,
}

/// The TSS of the task CPU `cpu`'s handler task of `kind` interrupted:
/// the one its back link names (SDM Vol. 3A §7.4: the previous task's
/// selector), that CPU's main TSS.
///
/// # Safety
/// Only from that handler task, while the interrupted task is suspended.
unsafe fn interrupted_by(cpu: usize, kind: TssKind) -> &'static mut Tss {
    // SAFETY: the handler task runs (the caller's contract), so its TSS's
    // link names the suspended task, whose TSS the CPU reloads only when
    // switching back.
    unsafe {
        let link = tss_of(cpu, kind).link as u16;
        let of = selector::cpu_of_tss(link).unwrap_or(cpu);
        tss_of(of, TssKind::Main)
    }
}

/// The TSS of the task CPU `cpu`'s debug task interrupted, writable: the
/// debug task edits the context it resumes.
///
/// # Safety
/// Only from CPU `cpu`'s debug task, while the interrupted task is
/// suspended.
pub unsafe fn interrupted_by_debug_mut(cpu: usize) -> &'static mut Tss {
    // SAFETY: the caller's contract.
    unsafe { interrupted_by(cpu, TssKind::Debug) }
}

/// The TSS of the task CPU `cpu`'s double-fault task interrupted: after a
/// double fault the CPU saved the faulting context's registers there (SDM
/// Vol. 3A §7.3, step 8).
///
/// # Safety
/// Only from CPU `cpu`'s double-fault task.
pub unsafe fn interrupted_by_double_fault(cpu: usize) -> &'static Tss {
    // SAFETY: the caller's contract; only read.
    unsafe { interrupted_by(cpu, TssKind::DoubleFault) }
}

/// The main TSS (CPU 0's), for traces.
pub fn main_tss() -> &'static Tss {
    // SAFETY: read-only view of a static the CPU writes only on task switches.
    unsafe { &*TSS.as_ptr() }
}

/// An application processor's first steps in protected mode: the GDT the
/// trampoline loaded is this one; load its TSS and its per-CPU segment.
pub fn init_ap(cpu: usize) {
    let tss = selector::tss(cpu);
    let gs = selector::PERCPU_BASE + 8 * cpu as u16;
    // SAFETY: both descriptors exist (add_percpu) and belong to this CPU.
    unsafe {
        load_tr(tss);
        asm!("movw {s:x}, %gs", s = in(reg) gs, options(att_syntax, nostack));
    }
}

/// The linear address of CPU `cpu`'s TSS (for the model clock's
/// announcement): the main TSS on CPU 0, an AP TSS on the others.
pub fn tss_address(cpu: usize) -> u32 {
    if cpu == 0 {
        TSS.as_ptr() as u32
    } else {
        // SAFETY: only the address of a static element is taken.
        unsafe { &raw const (*AP_TSS.as_ptr())[cpu - 1] as u32 }
    }
}

/// The GDTR value, for the trampoline to load.
pub fn gdtr() -> (u16, u32) {
    // SAFETY: a read of the table's length and address.
    let g = unsafe { GDT.get_mut() };
    ((g.len * 8 - 1) as u16, g.table.as_ptr() as u32)
}

/// This CPU's index: from the task register, which ring 3 cannot change
/// (the entry stubs do not reload GS, so the per-CPU segment is no help here).
pub fn cpu() -> usize {
    let tr: u16;
    // SAFETY: STR only reads the task register.
    unsafe { core::arch::asm!("str {0:x}", out(reg) tr, options(nomem, nostack, preserves_flags)) };
    // Any of a CPU's TSSs names it (in a handler task TR holds that CPU's
    // double-fault or debug TSS). Before the GDT is loaded TR is 0: the
    // bootstrap processor.
    selector::cpu_of_tss(tr).unwrap_or(0)
}
