//! The register frames the CPU and the kernel's stubs build on a kernel
//! stack: PUSHAL's block ([`Regs`]), the IRET frame, and the frame every
//! system-call entry and the timer interrupt share ([`EntryFrame`]), with
//! the byte offsets the assembly uses ([`frame`]).

/// The general registers as PUSHAL leaves them (SDM Vol. 2B, PUSHA/PUSHAD).
/// EAX holds the number on entry and the result on return.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct Regs {
    pub edi: u32,
    pub esi: u32,
    pub ebp: u32,
    pub esp_at_pushal: u32,
    pub ebx: u32,
    pub edx: u32,
    pub ecx: u32,
    pub eax: u32,
}

/// The IRET frame (SDM Vol. 3A §6.12.1, Figure 6-4): what an interrupt
/// from ring 3 pushes and IRET pops, lowest address first. The sysenter and
/// syscall entries build the same one by hand, so every slow return is a
/// plain IRET.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct IretFrame {
    pub eip: u32,
    pub cs: u32,
    pub eflags: u32,
    pub esp: u32,
    pub ss: u32,
}

/// What the int 0x80, sysenter and syscall full entries (and the timer
/// interrupt) leave on the kernel stack before they call Rust: PUSHAL's
/// registers, the user's ES and DS, the IRET frame. (The call gate's
/// frame differs: LRET's EIP, CS, ESP, SS, with the user's EFLAGS below.)
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct EntryFrame {
    pub regs: Regs,
    pub es: u32,
    pub ds: u32,
    pub iret: IretFrame,
}

/// Byte offsets into the frames, for the assembly (seL4's style: each slot
/// named once, the stubs use the names).
pub mod frame {
    use core::mem::{offset_of, size_of};

    use super::{EntryFrame, IretFrame, Regs};

    /// From ESP with the whole [`EntryFrame`] pushed.
    pub const CS: usize = offset_of!(EntryFrame, iret.cs);
    pub const EFLAGS: usize = offset_of!(EntryFrame, iret.eflags);
    pub const SS: usize = offset_of!(EntryFrame, iret.ss);
    /// From ESP with ES and DS pushed but not yet PUSHAL's registers.
    pub const USER_ESP_ABOVE_SEGMENTS: usize = offset_of!(EntryFrame, iret.esp) - size_of::<Regs>();
    /// From ESP at the IRET frame's EIP slot (after POPAL and the segments).
    pub const IRET_EIP: usize = offset_of!(IretFrame, eip);
    pub const IRET_ESP: usize = offset_of!(IretFrame, esp);
    /// From ESP at the IRET frame's EFLAGS slot (sysenter's first push).
    pub const IRET_ESP_ABOVE_EFLAGS: usize =
        offset_of!(IretFrame, esp) - offset_of!(IretFrame, eflags);

    const _: () = assert!(CS == 44 && EFLAGS == 48 && SS == 56 && USER_ESP_ABOVE_SEGMENTS == 20);
}

/// `global_asm!` for a stub that builds or unwinds an [`EntryFrame`]: the
/// one text of its save and restore, as assembler macros the stub names.
/// Every such stub (the int 0x80, call-gate, sysenter and syscall entries,
/// the PIT's and the SMP interrupts, the TLB shootdown's, and the scheduler's
/// first return of a forked child) pushes and pops the frame with the same
/// instructions in the same order, so one copy of them serves all, and
/// each stub's path is the instructions it named before, one for one.
///
/// - `frame_push_segments`: the interrupted DS and ES ([`EntryFrame`]'s
///   `ds`, `es`), which the way out restores whatever they were.
/// - `frame_push_regs`: PUSHAL, the [`Regs`] block (the dispatcher reads the
///   number and arguments there and writes the result into its EAX); then
///   the kernel's data segment in DS and ES before any access through them
///   (ECX is free: PUSHAL saved it).
/// - `frame_save`: the two in a row. The sysenter and syscall entries use
///   the halves, since each fetches an argument from the user's stack
///   between them.
/// - `frame_restore`: the reverse (POPAL, ES, DS), leaving ESP at the IRET
///   frame (or the call gate's), which the stub's own return instruction
///   consumes.
///
/// The stub's text comes first, then its operands; `{frame_kdata}` is the
/// macro's own. The definitions are dropped again at the end of the block
/// (`.purgem`), as the blocks of one object file share the assembler's
/// macro table.
macro_rules! frame_asm {
    ($text:literal, $($operands:tt)*) => {
        core::arch::global_asm!(
            r#"
    .macro frame_push_segments
    pushl %ds
    pushl %es
    .endm
    .macro frame_push_regs
    pushal
    movl ${frame_kdata}, %ecx
    movl %ecx, %ds
    movl %ecx, %es
    .endm
    .macro frame_save
    frame_push_segments
    frame_push_regs
    .endm
    .macro frame_restore
    popal
    popl %es
    popl %ds
    .endm
"#,
            $text,
            r#"
    .purgem frame_save
    .purgem frame_push_regs
    .purgem frame_push_segments
    .purgem frame_restore
"#,
            frame_kdata = const abi::layout::selector::KERNEL_DATA,
            $($operands)*
        );
    };
}
pub(crate) use frame_asm;
