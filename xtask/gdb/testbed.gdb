# gdb script for `cargo xtask gdb`: the kernel's symbols are loaded, the
# connection to QEMU's stub is made and the breakpoint on the chosen entry
# stub is set on gdb's command line (`--stop-at`, default int80). By hand:
#   gdb target/i686-testbed/release/kernel -ex 'target remote localhost:1234' \
#       -x xtask/gdb/testbed.gdb -ex 'break sysenter_full'
set confirm off
set pagination off
set disassembly-flavor att

define frame-words
  # What the entry mechanism itself left on the ring-0 stack, read at the
  # first instruction of an entry stub (docs/int80.md, sysenter.md,
  # callgate.md, syscall.md).
  set $tb_pc = (unsigned int)$pc
  if $tb_pc == (unsigned int)&int80_full
    echo int $0x80 pushed the IRET frame, five words (top of the stack last):\n
    printf "  [%#010x] SS     = %#010x\n", $esp+16, *(unsigned int *)($esp+16)
    printf "  [%#010x] ESP    = %#010x\n", $esp+12, *(unsigned int *)($esp+12)
    printf "  [%#010x] EFLAGS = %#010x\n", $esp+8, *(unsigned int *)($esp+8)
    printf "  [%#010x] CS     = %#010x\n", $esp+4, *(unsigned int *)($esp+4)
    printf "  [%#010x] EIP    = %#010x\n", $esp, *(unsigned int *)($esp)
  else
    if $tb_pc == (unsigned int)&callgate_full || $tb_pc == (unsigned int)&callgate_traced
      echo lcall through the gate pushed four words and no EFLAGS (top of the stack last):\n
      printf "  [%#010x] SS     = %#010x\n", $esp+12, *(unsigned int *)($esp+12)
      printf "  [%#010x] ESP    = %#010x\n", $esp+8, *(unsigned int *)($esp+8)
      printf "  [%#010x] CS     = %#010x\n", $esp+4, *(unsigned int *)($esp+4)
      printf "  [%#010x] EIP    = %#010x\n", $esp, *(unsigned int *)($esp)
    else
      if $tb_pc == (unsigned int)&sysenter_full || $tb_pc == (unsigned int)&sysenter_traced
        printf "sysenter pushed nothing: ESP = IA32_SYSENTER_ESP = %#x (the kernel stack's top minus 8),\n", $esp
        echo the stack below it is empty; the stub builds the frame itself from EBP and [EBP-4].\n
        printf "  the 8 bytes left above ESP, the IRET frame's ESP and SS slots (an earlier entry's): [%#x] = %#x, [%#x] = %#x\n", $esp, *(unsigned int *)$esp, $esp+4, *(unsigned int *)($esp+4)
        printf "  at %#x the stack ends: the page there is the guard page under the next thread's kernel stack,\n", $esp+8
        printf "  unmapped on purpose: x/8wx $esp asks for 24 bytes of it and fails there; x/2wx $esp reads the two words\n"
        printf "  user stack (EBP = %#x): return EIP [EBP-4] = %#x, argument 6 [EBP] = %#x\n", $ebp, *(unsigned int *)($ebp-4), *(unsigned int *)$ebp
      else
        if $tb_pc == (unsigned int)&syscall_full_0 || $tb_pc == (unsigned int)&syscall_traced_0
          printf "syscall pushed nothing and switched no stack: ESP = %#x is still the user's;\n", $esp
          printf "ECX = %#x is the return EIP; the stub's xchg swaps in the kernel stack.\n", $ecx
        else
          printf "frame-words reads the stack at an entry stub's first instruction; EIP = %#x is not one\n", $tb_pc
          echo (x/8wx $esp shows the stack here; see docs/teaching.md).\n
        end
      end
    end
  end
end
document frame-words
At the first instruction of an entry stub: what the mechanism pushed on the
ring-0 stack, word by word (int 0x80: five, the call gate: four), or that it
pushed nothing (sysenter, syscall) and where the stub finds the user's state.
end

echo \n[testbed] QEMU is paused before the first instruction. `continue` runs to the entry stub\n
echo [testbed] chosen by --stop-at; `frame-words` shows what the mechanism pushed; `stepi` walks the stub.\n
