//! The 32 CPU exceptions, the mechanism: one stub per vector, one common
//! path that saves the interrupted context as a [`TrapFrame`], the
//! exception table of instructions allowed to fault, the register dump, and
//! the two handler tasks. What a fault *means* (end the user task, resume
//! at a fixup, stop the kernel) is the trap module's (`crate::trap`), which
//! the stubs call by link name (the upcalls `arch` lists):
//!
//! - `exc_common` calls `trap_exception` with the frame.
//! - #DB comes through a task gate (`debug_task`), which calls
//!   `trap_debug`: SYSCALL does not switch stacks, so a user who sets TF
//!   traps at the first kernel instruction while ESP is still the user's,
//!   and an interrupt gate would push the exception frame wherever that ESP
//!   points, in ring 0. A task switch pushes nothing. A user thread that
//!   single-stepped leaves the debug task through `debug_kill`, in ring 0 on
//!   its kernel stack ([`send_to_kill`]), which calls `trap_debug_kill`.
//! - #DF comes through a task gate (`double_fault_task`, which calls
//!   `trap_double_fault`), so a kernel stack overflow is reported on a
//!   fresh stack instead of triple-faulting.
//! - From ring 0 at a listed instruction (the exception table): [`fix_up`]
//!   resumes at its fixup; this is how an entry stub's read of user memory
//!   fails softly, and how the counter check tries RDPMC and WRMSR (#GP,
//!   #PF and #UD are fixed up; [`last_fixup_vector`] says which it was).

use core::arch::global_asm;
use core::sync::atomic::{AtomicU32, AtomicU8, Ordering};

use abi::eflags;
use abi::exit::{vector_name, vector_title};
use abi::layout::selector;
use abi::report::kind;

use super::idt::{self, vector, Gate, GateKind};
use super::regs::{IretFrame, Regs};
use super::{cpu, gdt};
use crate::console::Hex;
use crate::{kprintln, record};

/// The stack after the common stub: PUSHAL's registers (the same block the
/// system-call entries save), the data segments, the vector and error code
/// the stub pushed, and the IRET frame the CPU pushed. Its ESP and SS slots
/// exist only when the exception came from ring 3.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct TrapFrame {
    pub regs: Regs,
    pub gs: u32,
    pub fs: u32,
    pub es: u32,
    pub ds: u32,
    pub vector: u32,
    pub error: u32,
    pub iret: IretFrame,
}

impl TrapFrame {
    pub fn from_user(&self) -> bool {
        self.iret.cs & 3 == 3
    }

    /// The interrupted ESP: pushed by the CPU on a ring change, otherwise
    /// just above the part of the frame the CPU pushed (at its ESP slot).
    pub fn esp(&self) -> u32 {
        if self.from_user() {
            self.iret.esp
        } else {
            &self.iret.esp as *const u32 as u32
        }
    }
}

// The stubs. Vectors where the CPU pushes an error code (8, 10-14, 17, 21,
// 29, 30) push only the vector; the others push a 0 first so every frame
// has the same shape.
global_asm!(
    r#"
    .pushsection .text.exceptions, "ax"
    .macro exc_noerr n
    .global exc_stub_\n
exc_stub_\n:
    pushl $0
    pushl $\n
    jmp exc_common
    .endm
    .macro exc_err n
    .global exc_stub_\n
exc_stub_\n:
    pushl $\n
    jmp exc_common
    .endm

    exc_noerr 0
    exc_noerr 1
    exc_noerr 2
    exc_noerr 3
    exc_noerr 4
    exc_noerr 5
    exc_noerr 6
    exc_noerr 7
    exc_err 8
    exc_noerr 9
    exc_err 10
    exc_err 11
    exc_err 12
    exc_err 13
    exc_err 14
    exc_noerr 15
    exc_noerr 16
    exc_err 17
    exc_noerr 18
    exc_noerr 19
    exc_noerr 20
    exc_err 21
    exc_noerr 22
    exc_noerr 23
    exc_noerr 24
    exc_noerr 25
    exc_noerr 26
    exc_noerr 27
    exc_noerr 28
    exc_err 29
    exc_err 30
    exc_noerr 31

    .global exc_stub_table
exc_common:
    /* Save the interrupted context's data segments and registers. */
    pushl %ds
    pushl %es
    pushl %fs
    pushl %gs
    pushal
    /* Kernel data segments; DF clear for Rust (the gate cleared TF and IF). */
    movl ${kdata}, %eax
    movl %eax, %ds
    movl %eax, %es
    cld
    movl %esp, %ecx
    call trap_exception
    /* Handled: resume whatever was interrupted, perhaps at a new EIP. */
    popal
    popl %gs
    popl %fs
    popl %es
    popl %ds
    addl $8, %esp
    iret

    /* The debug task: entered by a task switch through IDT vector 1; the
       interrupted context is in the main TSS. IRET with NT set switches
       back, and the CPU saves this task's EIP (the jmp) in its TSS, so the
       next #DB starts at the jmp and comes round to the call again. */
    .global debug_task, debug_kill
debug_task:
    call trap_debug
    iret
    jmp debug_task

    /* Where the debug task sends a user thread that single-stepped in ring 3:
       ring 0, the thread's kernel stack, kernel segments. */
debug_kill:
    call trap_debug_kill

    /* The double-fault task starts here on its own stack with the error
       code (always 0) pushed; the faulting context is in the main TSS. */
    .pushsection .rodata
exc_stub_table:
    .irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
    .long exc_stub_\n
    .endr
    .popsection

    .global double_fault_task
double_fault_task:
    call trap_double_fault
1:  cli
    hlt
    jmp 1b
    .popsection
    "#,
    kdata = const selector::KERNEL_DATA,
    options(att_syntax)
);

unsafe extern "C" {
    static double_fault_task: u8;
    static debug_task: u8;
    static debug_kill: u8;
    static exc_stub_table: [u32; 32];
}

/// Addresses of the 32 stubs, by vector.
pub fn stubs() -> [u32; 32] {
    // SAFETY: a read-only table the assembler filled with the stubs' addresses.
    unsafe { exc_stub_table }
}

/// The entry point of the double-fault task, for its TSS.
pub fn double_fault_entry() -> u32 {
    &raw const double_fault_task as u32
}

/// The entry point of the debug task, for its TSS.
pub fn debug_entry() -> u32 {
    &raw const debug_task as u32
}

/// Installs the 32 exception gates. #BP is reachable from ring 3 (`int3`);
/// the others only by the CPU itself. #DF is a task gate.
pub fn install() {
    for (v, &stub) in stubs().iter().enumerate() {
        let ring = if v as u8 == vector::BREAKPOINT { 3 } else { 0 };
        idt::set(v as u8, Gate::new(stub, GateKind::Interrupt, ring));
    }
    // Each CPU's table names that CPU's own handler tasks.
    for cpu in 0..abi::layout::MAX_CPUS {
        idt::set_on(
            cpu,
            vector::DOUBLE_FAULT,
            Gate::task(selector::double_fault_tss(cpu)),
        );
        idt::set_on(cpu, vector::DEBUG, Gate::task(selector::debug_tss(cpu)));
    }
}

/// An entry in the exception table: a faulting instruction and where to go.
#[repr(C)]
struct ExEntry {
    insn: u32,
    fixup: u32,
}

unsafe extern "C" {
    static __extable_start: ExEntry;
    static __extable_end: ExEntry;
}

/// The vector of the last exception the table fixed up.
static FIXUP_VECTOR: AtomicU8 = AtomicU8::new(0);

/// The vector of the last fault the exception table fixed up, for the fixup
/// code that wants to say what happened (read it right after the fixup, on
/// the CPU that took it; the counter check runs on the boot CPU alone).
pub fn last_fixup_vector() -> u8 {
    FIXUP_VECTOR.load(Ordering::Relaxed)
}

/// The faults an exception-table entry may turn into a jump to its fixup.
const FIXED_UP: [u8; 3] = [
    vector::PAGE_FAULT,
    vector::GENERAL_PROTECTION,
    vector::INVALID_OPCODE,
];

fn fixup_for(eip: u32) -> Option<u32> {
    let start = &raw const __extable_start;
    let end = &raw const __extable_end;
    let n = (end as usize - start as usize) / core::mem::size_of::<ExEntry>();
    // SAFETY: the linker script brackets the table with these symbols.
    let table = unsafe { core::slice::from_raw_parts(start, n) };
    table.iter().find(|e| e.insn == eip).map(|e| e.fixup)
}

/// Whether the exception table lists the instruction at `eip` (a ring-0
/// read or write of user memory that may fault).
pub fn listed(eip: u32) -> bool {
    fixup_for(eip).is_some()
}

/// For a fault in ring 0: if the exception table lists the faulting
/// instruction (and the fault is one it fixes up), points the frame at its
/// fixup, notes the vector for [`last_fixup_vector`], and says so.
pub fn fix_up(f: &mut TrapFrame) -> bool {
    let v = f.vector as u8;
    if FIXED_UP.contains(&v) {
        if let Some(fixup) = fixup_for(f.iret.eip) {
            FIXUP_VECTOR.store(v, Ordering::Relaxed);
            f.iret.eip = fixup;
            return true;
        }
    }
    false
}

/// The report of an exception: its name, the mode it came from, the
/// register dump and the exception record.
pub fn report(f: &TrapFrame, mode: &str) {
    let v = f.vector as u8;
    kprintln!(
        "{} {} (vector {}) in {} mode, error code {:#x}",
        vector_name(v),
        vector_title(v),
        v,
        mode,
        f.error
    );
    dump(&Context::from(f), v, mode);
}

/// The register dump and the exception record of a context a task switch
/// saved (the #DF and #DB handler tasks' view of what they interrupted).
pub fn report_tss(t: &gdt::Tss, vector: u8, mode: &str) {
    dump(&Context::from(t), vector, mode);
}

/// An interrupted context, wherever the CPU left it: a trap frame on the
/// kernel stack, or a TSS after a task switch. One register dump and one
/// record serve both. Segment registers are 16-bit selectors: the CPU
/// pushes each in a 32-bit slot and need not write the upper half (SDM
/// Vol. 3A §6.12.1; Vol. 2B, PUSH), and a TSS keeps it reserved.
struct Context {
    eip: u32,
    cs: u16,
    eflags: u32,
    esp: u32,
    eax: u32,
    ebx: u32,
    ecx: u32,
    edx: u32,
    esi: u32,
    edi: u32,
    ebp: u32,
    error: u32,
    /// DS and ES, shown when the save is a trap frame (the common stub
    /// pushed them); a TSS dump leaves them out.
    data_segments: Option<(u16, u16)>,
}

/// The selector in a segment register's 32-bit save slot.
fn selector_of(slot: u32) -> u16 {
    slot as u16
}

impl From<&TrapFrame> for Context {
    fn from(f: &TrapFrame) -> Context {
        Context {
            eip: f.iret.eip,
            cs: selector_of(f.iret.cs),
            eflags: f.iret.eflags,
            esp: f.esp(),
            eax: f.regs.eax,
            ebx: f.regs.ebx,
            ecx: f.regs.ecx,
            edx: f.regs.edx,
            esi: f.regs.esi,
            edi: f.regs.edi,
            ebp: f.regs.ebp,
            error: f.error,
            data_segments: Some((selector_of(f.ds), selector_of(f.es))),
        }
    }
}

impl From<&gdt::Tss> for Context {
    /// A task switch saves no error code: 0.
    fn from(t: &gdt::Tss) -> Context {
        Context {
            eip: t.eip,
            cs: selector_of(t.cs),
            eflags: t.eflags,
            esp: t.esp,
            eax: t.eax,
            ebx: t.ebx,
            ecx: t.ecx,
            edx: t.edx,
            esi: t.esi,
            edi: t.edi,
            ebp: t.ebp,
            error: 0,
            data_segments: None,
        }
    }
}

/// "  DS 0x0023 ES 0x0023", or nothing.
struct DataSegments(Option<(u16, u16)>);

impl core::fmt::Display for DataSegments {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.0 {
            Some((ds, es)) => write!(f, "  DS {ds:#06x} ES {es:#06x}"),
            None => Ok(()),
        }
    }
}

/// The register dump and the exception record of an interrupted context.
fn dump(c: &Context, vector: u8, mode: &str) {
    let cr2 = cpu::cr2();
    kprintln!(
        "  EIP {:#010x}  CS {:#06x}  EFLAGS {:#010x}  ESP {:#010x}  CR2 {:#010x}",
        c.eip,
        c.cs,
        c.eflags,
        c.esp,
        cr2
    );
    kprintln!(
        "  EAX {:#010x}  EBX {:#010x}  ECX {:#010x}  EDX {:#010x}",
        c.eax,
        c.ebx,
        c.ecx,
        c.edx
    );
    kprintln!(
        "  ESI {:#010x}  EDI {:#010x}  EBP {:#010x}{}",
        c.esi,
        c.edi,
        c.ebp,
        DataSegments(c.data_segments)
    );
    record!(kind::EXCEPTION,
        "vector" => vector, "name" => vector_name(vector), "mode" => mode, "error" => Hex(c.error),
        "eip" => Hex(c.eip), "cs" => Hex(c.cs as u32), "eflags" => Hex(c.eflags),
        "eax" => Hex(c.eax), "ebx" => Hex(c.ebx), "ecx" => Hex(c.ecx), "edx" => Hex(c.edx),
        "esi" => Hex(c.esi), "edi" => Hex(c.edi), "ebp" => Hex(c.ebp), "esp" => Hex(c.esp),
        "cr2" => Hex(cr2));
}

/// Where a user thread that single-stepped was, by CPU, for
/// [`killed_eip`].
static DEBUG_EIP: [AtomicU32; abi::layout::MAX_CPUS] =
    [const { AtomicU32::new(0) }; abi::layout::MAX_CPUS];

/// From CPU `me`'s debug task: makes the interrupted context `t` (a user
/// thread that trapped in ring 3) resume at `debug_kill`, in ring 0 on the
/// thread's kernel stack (TSS.ESP0) with kernel segments and interrupts
/// off, where `trap_debug_kill` runs once the task switch has gone back.
/// Its user EIP is kept for [`killed_eip`].
pub fn send_to_kill(me: usize, t: &mut gdt::Tss) {
    // Read by killed_eip once this CPU's main task runs again.
    DEBUG_EIP[me].store(t.eip, Ordering::Relaxed);
    t.eip = &raw const debug_kill as u32;
    t.cs = selector::KERNEL_CODE as u32;
    t.esp = t.esp0;
    t.eflags = eflags::RESERVED_1;
    for seg in [&mut t.ss, &mut t.ds, &mut t.es, &mut t.fs, &mut t.gs] {
        *seg = selector::KERNEL_DATA as u32;
    }
}

/// At `debug_kill`: the user EIP of the thread [`send_to_kill`] sent there
/// on this CPU.
pub fn killed_eip() -> u32 {
    DEBUG_EIP[super::gdt::cpu()].load(Ordering::Relaxed)
}
