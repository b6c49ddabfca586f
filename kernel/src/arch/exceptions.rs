//! The 32 CPU exceptions: one stub per vector, one common path, one Rust
//! handler that decides what the fault means.
//!
//! - From ring 3: the user task is ended with a report (vector, EIP, error
//!   code, CR2) and the kernel goes on (`task::end_current`). One exception:
//!   an RDPMC that faults after the boot offered the counters turns them off
//!   and the program goes on (`pmu::user_fault`).
//! - From ring 0 at a listed instruction (the exception table): resume at
//!   its fixup; this is how an entry stub's read of user memory fails softly,
//!   and how the counter check tries RDPMC and WRMSR (#GP, #PF and #UD are
//!   fixed up; [`last_fixup_vector`] says which it was).
//! - #DB comes through a task gate too (`debug_task`): SYSCALL does not
//!   switch stacks, so a user who sets TF traps at the first kernel
//!   instruction while ESP is still the user's, and an interrupt gate would
//!   push the exception frame wherever that ESP points, in ring 0. A task
//!   switch pushes nothing. A trap at an entry's first instruction (the user
//!   had TF set; SYSENTER, a call gate and SYSCALL do not clear it) resumes
//!   at the entry's "traced" variant, which keeps the user's TF; a trap in
//!   ring 3 ends the task.
//! - Anything else from ring 0 is a kernel bug: report and exit with
//!   `EXCEPTION_BASE + vector`.
//! - #DF comes through a task gate (see `double_fault_task`), so a kernel
//!   stack overflow is reported on a fresh stack instead of triple-faulting.

use core::arch::global_asm;
use core::sync::atomic::{AtomicU32, AtomicU8, Ordering};

use abi::eflags;
use abi::exit::{vector_name, vector_title, EXCEPTION_BASE};
use abi::layout::selector;
use abi::report::kind;

use super::idt::{self, vector, Gate, GateKind};
use super::regs::{IretFrame, Regs};
use super::{cpu, gdt, pmu, power};
use crate::console::Hex;
use crate::{entry, kprintln, record, task};

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
    call {handler}
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
    call {db}
    iret
    jmp debug_task

    /* Where the debug task sends a user thread that single-stepped in ring 3:
       ring 0, the thread's kernel stack, kernel segments. */
debug_kill:
    call {db_end}

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
    call {df}
1:  cli
    hlt
    jmp 1b
    .popsection
    "#,
    kdata = const selector::KERNEL_DATA,
    handler = sym exception_handler,
    df = sym double_fault,
    db = sym debug_trap,
    db_end = sym debug_end_task,
    options(att_syntax)
);

unsafe extern "C" {
    static double_fault_task: u8;
    static debug_task: u8;
    static debug_kill: u8;
    static exc_stub_table: [u32; 32];
}

/// Addresses of the 32 stubs, by vector.
fn stubs() -> [u32; 32] {
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

extern "fastcall" fn exception_handler(f: &mut TrapFrame) {
    let v = f.vector as u8;
    if f.from_user() {
        if (v == vector::GENERAL_PROTECTION || v == vector::INVALID_OPCODE) && pmu::user_fault(f) {
            return;
        }
        // Copy-on-write and demand-zero pages are resolved by the process's
        // memory (error code bit 1: the access was a write, SDM Vol. 3A §4.7).
        if v == vector::PAGE_FAULT
            && crate::proc::fault(cpu::cr2(), f.error & 2 != 0) == crate::vm::Fault::Resolved
        {
            return;
        }
        crate::kprintln!(
            "task {} (pid {}):",
            task::current().name,
            task::current().pid
        );
        report(f, "user");
        task::end_current(task::End::Fault {
            vector: v,
            eip: f.iret.eip,
        });
    }
    if FIXED_UP.contains(&v) {
        if let Some(fixup) = fixup_for(f.iret.eip) {
            // A listed read of user memory (an entry stub's) that met a
            // demand-zero or copy-on-write page: resolve it and retry.
            if v == vector::PAGE_FAULT
                && crate::proc::fault(cpu::cr2(), f.error & 2 != 0) == crate::vm::Fault::Resolved
            {
                return;
            }
            FIXUP_VECTOR.store(v, Ordering::Relaxed);
            f.iret.eip = fixup;
            return;
        }
    }
    report(f, "kernel");
    kprintln!("kernel: unexpected {} in ring 0, stopping", vector_name(v));
    power::exit(EXCEPTION_BASE + v as u32);
}

fn report(f: &TrapFrame, mode: &str) {
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

/// Runs as a CPU's double-fault task. The faulting context was saved in
/// that CPU's main TSS by the task switch; report it and stop.
extern "C" fn double_fault() -> ! {
    let me = crate::task::sched::cpu();
    // SAFETY: this is CPU `me`'s double-fault task.
    let t = unsafe { gdt::interrupted_by_double_fault(me) };
    let cr2 = cpu::cr2();
    kprintln!(
        "#DF double fault (vector 8) on CPU {me}, taken through the task gate on its own stack"
    );
    dump(&Context::from(t), vector::DOUBLE_FAULT, "kernel");
    let stacks = crate::boot::entry::stacks();
    if stacks
        .guards()
        .chain(crate::task::sched::stack_guards())
        .any(|g| g != 0 && (g..g + abi::layout::PAGE_SIZE).contains(&cr2))
    {
        kprintln!("  CR2 is in a stack guard page: kernel stack overflow");
    }
    power::exit(EXCEPTION_BASE + vector::DOUBLE_FAULT as u32);
}

/// Where a #DB taken in ring 0 at `eip` resumes, if it is a trap ring 3
/// caused (the caller clears TF); `None` for anything else, a kernel bug.
///
/// - At a system-call entry's first instruction: SYSENTER, a call gate and
///   SYSCALL keep TF, and an `int` that a MOV SS or POP SS held the trap
///   over delivers it there (`entry::traced_entry`: the full entries go on
///   through their "traced" variant, which gives the user back its TF).
/// - At an exception stub's first instruction: the same held-off trap
///   (MOV SS / POP SS, SDM Vol. 3A §6.8.3) when the next instruction raised
///   an exception instead: `int3` (#BP, a DPL-3 gate), `into` or `int n`
///   through a DPL-0 gate (#GP), any fault. The CPU then delivers the #DB
///   after the transition, on the stub's first instruction in ring 0.
///   The stub simply goes on: the exception it is entering ends the task.
///   #DB and #DF are task gates, not stubs, so they are not in the list.
fn held_trap_resume(eip: u32) -> Option<u32> {
    if let Some(traced) = entry::traced_entry(eip) {
        return Some(traced);
    }
    stubs()
        .iter()
        .enumerate()
        .any(|(v, &stub)| {
            stub == eip && v as u8 != vector::DEBUG && v as u8 != vector::DOUBLE_FAULT
        })
        .then_some(eip)
}

/// For the kernel tests: every exception stub's first instruction and each
/// system-call entry's resume, with whether a #DB there resumes.
pub fn held_trap_check() -> Result<(), &'static str> {
    for (v, &stub) in stubs().iter().enumerate() {
        let task_gate = v as u8 == vector::DEBUG || v as u8 == vector::DOUBLE_FAULT;
        if held_trap_resume(stub).is_some() == task_gate {
            return Err(if task_gate {
                "a trap at a task gate's unused stub would be resumed"
            } else {
                "a trap held off onto an exception stub (int3, into, a #GP) would power off"
            });
        }
    }
    if held_trap_resume(stubs()[vector::BREAKPOINT as usize] + 1).is_some() {
        return Err("a trap inside a stub (not at its first instruction) would be resumed");
    }
    Ok(())
}

/// Where a user thread that single-stepped was, by CPU, for
/// `debug_end_task`.
static DEBUG_EIP: [AtomicU32; abi::layout::MAX_CPUS] =
    [const { AtomicU32::new(0) }; abi::layout::MAX_CPUS];

/// Runs as a CPU's debug task. Decides what the #DB meant from the
/// interrupted context in that CPU's main TSS, and edits that context
/// before switching back.
extern "C" fn debug_trap() {
    let me = crate::task::sched::cpu();
    // SAFETY: this is CPU `me`'s debug task; the interrupted task (this
    // CPU's main task) is suspended while it runs.
    let t = unsafe { gdt::interrupted_by_debug_mut(me) };
    if t.cs & 3 == 3 {
        // A single step in ring 3: the task ends, like any user fault. Leave
        // through `debug_kill`, in ring 0 on the thread's kernel stack.
        kprintln!(
            "task {} (pid {}):",
            task::current().name,
            task::current().pid
        );
        kprintln!(
            "#DB debug (vector 1) in user mode: a single-step trap; the next instruction would be"
        );
        dump(&Context::from(&*t), vector::DEBUG, "user");
        // Read by debug_end_task once this CPU's main task runs again.
        DEBUG_EIP[me].store(t.eip, Ordering::Relaxed);
        t.eip = &raw const debug_kill as u32;
        t.cs = selector::KERNEL_CODE as u32;
        t.esp = t.esp0;
        t.eflags = eflags::RESERVED_1;
        for seg in [&mut t.ss, &mut t.ds, &mut t.es, &mut t.fs, &mut t.gs] {
            *seg = selector::KERNEL_DATA as u32;
        }
        return;
    }
    if let Some(resume) = held_trap_resume(t.eip) {
        // The trap came at an entry's or an exception stub's first
        // instruction: the user had TF set. Stop stepping the kernel and go
        // on (see `held_trap_resume`).
        t.eflags &= !eflags::TF;
        t.eip = resume;
        return;
    }
    kprintln!(
        "#DB debug (vector 1) in kernel mode at EIP {:#010x}, EFLAGS {:#010x}: not an entry stub",
        t.eip,
        t.eflags
    );
    power::exit(EXCEPTION_BASE + vector::DEBUG as u32);
}

/// A user thread that single-stepped: end its task (in the main task, ring 0).
extern "C" fn debug_end_task() -> ! {
    // Written by this CPU's debug task before it switched here.
    let eip = DEBUG_EIP[crate::task::sched::cpu()].load(Ordering::Relaxed);
    task::end_current(task::End::Fault {
        vector: vector::DEBUG,
        eip,
    })
}
