# gdb script for `cargo xtask gdb`: the kernel's symbols are loaded and the
# connection to QEMU's stub is made on gdb's command line before this runs
# (by hand: gdb target/i686-testbed/release/kernel -ex 'target remote
# localhost:1234' -x xtask/gdb/testbed.gdb). It stops on every entry stub.
set confirm off
set pagination off
set disassembly-flavor att

# One breakpoint per system-call entry (kernel/src/entry/*.rs) and the
# dispatcher every full entry calls.
break int80_full
break sysenter_full
break callgate_full
break syscall_full
break sysenter_traced
break callgate_traced

define frame-words
  # The words on the ring-0 stack: what the CPU (or the stub) pushed.
  x/5wx $esp
end
document frame-words
Show the top five words of the current stack (an interrupt frame from ring 3).
end

echo \n[testbed] QEMU is paused before the first instruction. `continue` runs to the first\n
echo [testbed] entry stub; `frame-words` shows what the CPU pushed; `stepi` walks the stub.\n
