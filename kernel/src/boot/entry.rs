//! Multiboot 1 and 2 headers in one ELF, and the entry stub.
//!
//! QEMU's `-kernel` speaks Multiboot 1 only; GRUB's `multiboot2` command
//! loads through the Multiboot 2 header. Both hand over in 32-bit protected
//! mode with paging off, flat segments, EAX = the protocol's magic and
//! EBX = the physical address of its information structure
//! (Multiboot 1 spec §3.2; Multiboot 2 spec §3.3).

use core::arch::global_asm;

/// Size of the boot stack: kmain, the in-kernel tests and the code that
/// enters ring 3 run on it.
pub const BOOT_STACK_SIZE: usize = 64 * 1024;
/// Size of the ring-0 stack entered from ring 3 (TSS.ESP0 and SYSENTER_ESP).
pub const KERNEL_STACK_SIZE: usize = 16 * 1024;
/// Size of the double-fault task's stack (and of the debug task's).
pub const DF_STACK_SIZE: usize = 8 * 1024;
/// The application processors' handler-task stacks: a double-fault and a
/// debug stack for each, every one above its own guard page.
const AP_HANDLER_STACKS: usize = 2 * (abi::layout::MAX_CPUS - 1);
/// Bytes of one AP handler stack with the guard page below it.
const HANDLER_SLOT: u32 = abi::layout::PAGE_SIZE + DF_STACK_SIZE as u32;

global_asm!(
    r#"
    .pushsection .multiboot1, "a"
    .align 4
    /* Multiboot 1: magic, flags (bit 0: page-align modules, bit 1: give a
       memory map), checksum. ELF kernel, so no address fields. */
    .long 0x1BADB002
    .long 0x00000003
    .long -(0x1BADB002 + 0x00000003)
    .popsection

    .pushsection .multiboot2, "a"
    .align 8
mb2_header_start:
    /* Multiboot 2: magic, architecture 0 (i386 protected mode), length, checksum. */
    .long 0xE85250D6
    .long 0
    .long mb2_header_end - mb2_header_start
    .long -(0xE85250D6 + 0 + (mb2_header_end - mb2_header_start))
    /* End tag: type 0, flags 0, size 8. */
    .short 0
    .short 0
    .long 8
mb2_header_end:
    .popsection

    /* The stacks, each above an unmapped guard page (see arch::paging), so a
       kernel stack overflow faults instead of overwriting what lies below. */
    .pushsection .stacks, "aw", @nobits
    .align 4096
    .global boot_stack_guard, boot_stack_top
    .global kernel_stack_guard, kernel_stack_top
    .global df_stack_guard, df_stack_top
    .global db_stack_guard, db_stack_top
    .global ap_handler_stacks
boot_stack_guard:
    .skip 4096
    .skip {boot_size}
boot_stack_top:
kernel_stack_guard:
    .skip 4096
    .skip {kernel_size}
kernel_stack_top:
df_stack_guard:
    .skip 4096
    .skip {df_size}
df_stack_top:
db_stack_guard:
    .skip 4096
    .skip {df_size}
db_stack_top:
    /* Each AP's double-fault and debug stacks, in that order, each a guard
       page and then the stack (HANDLER_SLOT bytes). */
ap_handler_stacks:
    .rept {ap_handlers}
    .skip 4096
    .skip {df_size}
    .endr
    .popsection

    .pushsection .text.boot, "ax"
    .global _start
    .code32
_start:
    /* The loader left interrupts off; DF and the rest of EFLAGS are unknown. */
    cli
    cld
    movl $boot_stack_top, %esp
    /* Keep the magic (EAX) and the info pointer (EBX) across the BSS clear. */
    movl %eax, %esi
    movl %ebx, %ebp
    /* Zero the BSS, stacks included. The info structure lies outside the
       image (loaders place it after the modules or in low memory). */
    movl $__bss_start, %edi
    movl $__bss_end, %ecx
    subl %edi, %ecx
    xorl %eax, %eax
    rep stosb
    /* EFLAGS to a known state: only the reserved bit 1. */
    pushl ${known_eflags}
    popfl
    /* kmain(magic, info): never returns. */
    pushl %ebp
    pushl %esi
    call kmain
1:  cli
    hlt
    jmp 1b
    .popsection
    "#,
    boot_size = const BOOT_STACK_SIZE,
    kernel_size = const KERNEL_STACK_SIZE,
    df_size = const DF_STACK_SIZE,
    ap_handlers = const AP_HANDLER_STACKS,
    known_eflags = const abi::eflags::RESERVED_1,
    options(att_syntax)
);

unsafe extern "C" {
    static boot_stack_guard: u8;
    static kernel_stack_guard: u8;
    static kernel_stack_top: u8;
    static df_stack_guard: u8;
    static df_stack_top: u8;
    static db_stack_guard: u8;
    static db_stack_top: u8;
    static ap_handler_stacks: u8;
}

/// Addresses of the stacks and their guard pages, from the linker.
pub struct Stacks {
    pub boot_guard: u32,
    pub kernel_guard: u32,
    pub kernel_top: u32,
    pub df_guard: u32,
    pub df_top: u32,
    pub db_guard: u32,
    pub db_top: u32,
    /// The first AP handler stack's guard page (see [`Stacks::handler`]).
    pub ap_handlers: u32,
}

impl Stacks {
    /// The guard page and the top of CPU `cpu`'s double-fault stack, or
    /// with `debug` its debug task's.
    pub fn handler(&self, cpu: usize, debug: bool) -> (u32, u32) {
        match (cpu, debug) {
            (0, false) => (self.df_guard, self.df_top),
            (0, true) => (self.db_guard, self.db_top),
            _ => {
                let slot = 2 * (cpu - 1) + debug as usize;
                let guard = self.ap_handlers + slot as u32 * HANDLER_SLOT;
                (guard, guard + HANDLER_SLOT)
            }
        }
    }

    /// Every guard page of these stacks (page 0, the null guard, too).
    pub fn guards(&self) -> impl Iterator<Item = u32> + '_ {
        [0, self.boot_guard, self.kernel_guard].into_iter().chain(
            (0..abi::layout::MAX_CPUS)
                .flat_map(|c| [self.handler(c, false).0, self.handler(c, true).0]),
        )
    }
}

pub fn stacks() -> Stacks {
    // Only the symbols' addresses are taken, never their contents.
    Stacks {
        boot_guard: &raw const boot_stack_guard as u32,
        kernel_guard: &raw const kernel_stack_guard as u32,
        kernel_top: &raw const kernel_stack_top as u32,
        df_guard: &raw const df_stack_guard as u32,
        df_top: &raw const df_stack_top as u32,
        db_guard: &raw const db_stack_guard as u32,
        db_top: &raw const db_stack_top as u32,
        ap_handlers: &raw const ap_handler_stacks as u32,
    }
}
