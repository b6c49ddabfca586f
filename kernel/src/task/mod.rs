//! User tasks, one at a time: load a program from a Multiboot module, enter
//! ring 3, and come back here when it exits or faults.
//!
//! `enter_user` saves the kernel's callee-saved registers and ESP (on the
//! boot stack), then IRETs to ring 3. Whatever ends the task — `exit`, a
//! fault, a bad stack on a fast entry — calls [`end_current`], which records
//! why and jumps back onto that saved stack, so `run` returns as if
//! `enter_user` had. The ring-0 stack the task was using is simply dropped.

pub mod elf;

use core::arch::global_asm;

use abi::layout::{selector, PAGE_SIZE, USER_STACK_SIZE, USER_STACK_TOP};
use abi::report::kind;
use abi::syscall::DEFAULT_EUID;

use crate::arch::paging;
use crate::boot::info::Module;
use crate::sync::cell::BootCell;
use crate::{kprintln, record};

/// The running task's identity.
#[derive(Clone, Copy, Debug)]
pub struct Task {
    pub pid: u32,
    pub euid: u32,
    pub name: &'static str,
}

/// Why a task stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// `exit(status)`.
    Exit(i32),
    /// A CPU exception in ring 3.
    Fault { vector: u8, eip: u32 },
    /// A fast entry (sysenter, syscall) found no valid user stack to read.
    BadStack { mechanism: &'static str },
}

static CURRENT: BootCell<Task> = BootCell::new(Task {
    pid: 0,
    euid: 0,
    name: "kernel",
});
static NEXT_PID: BootCell<u32> = BootCell::new(1);
static ENDED: BootCell<Option<End>> = BootCell::new(None);
/// The kernel ESP saved by enter_user (read by leave_user).
#[unsafe(no_mangle)]
static mut SAVED_KERNEL_ESP: u32 = 0;

global_asm!(
    r#"
    .pushsection .text.task, "ax"
    .global enter_user, leave_user
    /* enter_user(eip, esp, arg) -> returns when the task ends (cdecl). */
enter_user:
    pushl %ebp
    pushl %ebx
    pushl %esi
    pushl %edi
    movl %esp, SAVED_KERNEL_ESP
    movl 20(%esp), %ecx
    movl 24(%esp), %edx
    movl 28(%esp), %eax
    /* An IRET frame to ring 3: SS, ESP, EFLAGS (IF on, IOPL 0), CS, EIP. */
    pushl ${udata}
    pushl %edx
    pushl $0x202
    pushl ${ucode}
    pushl %ecx
    movl ${udata}, %ecx
    movl %ecx, %ds
    movl %ecx, %es
    movl %ecx, %fs
    movl %ecx, %gs
    /* Nothing of the kernel's leaks to the user: EAX = arg, the rest 0. */
    xorl %ebx, %ebx
    xorl %ecx, %ecx
    xorl %edx, %edx
    xorl %esi, %esi
    xorl %edi, %edi
    xorl %ebp, %ebp
    iret

    /* leave_user(): back onto enter_user's stack, and return from it. */
leave_user:
    movl SAVED_KERNEL_ESP, %esp
    popl %edi
    popl %esi
    popl %ebx
    popl %ebp
    ret
    .popsection
    "#,
    udata = const selector::USER_DATA,
    ucode = const selector::USER_CODE,
    options(att_syntax)
);

unsafe extern "C" {
    fn enter_user(eip: u32, esp: u32, arg: u32);
    fn leave_user() -> !;
}

pub fn current() -> &'static Task {
    // SAFETY: written only by `run`, between tasks.
    unsafe { CURRENT.get_mut() }
}

/// Ends the running task and returns to whoever called `run`.
pub fn end_current(why: End) -> ! {
    // SAFETY: one context at a time; `run` reads it after leave_user.
    unsafe { *ENDED.get_mut() = Some(why) };
    // SAFETY: enter_user saved a valid kernel stack; everything above it on
    // the ring-0 stack belongs to the task being ended.
    unsafe { leave_user() }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadError {
    Elf(&'static str),
    OutOfMemory,
}

/// Loads `module` as a user program, runs it with EAX = `arg`, and reports
/// how it ended.
pub fn run(module: &Module<'static>, arg: u32) -> Result<End, LoadError> {
    let image = module_bytes(module);
    let entry = elf::load(image).inspect_err(|_| paging::clear_user())?;
    // The stack, with the page below it left unmapped as a guard.
    let mut page = USER_STACK_TOP - USER_STACK_SIZE;
    while page < USER_STACK_TOP {
        if paging::map_user(page, true).is_err() {
            paging::clear_user();
            return Err(LoadError::OutOfMemory);
        }
        page += PAGE_SIZE;
    }
    crate::syscall::reset_ring();
    // SAFETY: between tasks, nothing else touches these cells.
    let pid = unsafe {
        let next = NEXT_PID.get_mut();
        let pid = *next;
        *next += 1;
        *CURRENT.get_mut() = Task {
            pid,
            euid: DEFAULT_EUID,
            name: module.name,
        };
        *ENDED.get_mut() = None;
        pid
    };
    // SAFETY: the program and its stack are mapped user-accessible; the
    // kernel's ring-0 entries (TSS.ESP0, MSRs, gates) are set up.
    unsafe { enter_user(entry, USER_STACK_TOP, arg) };
    paging::clear_user();
    // SAFETY: set by end_current before leave_user.
    let end = unsafe { ENDED.get_mut().take() }.expect("a task ends through end_current");
    match end {
        End::Exit(code) => {
            record!(kind::TASK, "prog" => module.name, "pid" => pid, "how" => "exit", "code" => code)
        }
        End::Fault { vector, eip } => {
            kprintln!(
                "task {} (pid {}) ended by {} at {:#x}",
                module.name,
                pid,
                abi::exit::vector_name(vector),
                eip
            );
            record!(kind::TASK, "prog" => module.name, "pid" => pid, "how" => "fault",
                "code" => vector, "name" => abi::exit::vector_name(vector))
        }
        End::BadStack { mechanism } => {
            kprintln!(
                "task {} (pid {}) ended: {mechanism} with no valid user stack",
                module.name,
                pid
            );
            record!(kind::TASK, "prog" => module.name, "pid" => pid, "how" => "badstack",
                "code" => 0, "name" => mechanism)
        }
    }
    // SAFETY: between tasks.
    unsafe {
        *CURRENT.get_mut() = Task {
            pid: 0,
            euid: 0,
            name: "kernel",
        }
    };
    Ok(end)
}

fn module_bytes(m: &Module<'static>) -> &'static [u8] {
    // SAFETY: the loader placed the module at [start, end), inside the
    // identity map, and the frame allocator never hands those frames out.
    unsafe { core::slice::from_raw_parts(m.start as *const u8, (m.end - m.start) as usize) }
}
