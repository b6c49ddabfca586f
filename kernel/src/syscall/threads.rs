//! System calls for threads, user mutexes (umtx) and sleep/wakeup.

use abi::report::kind;
use abi::syscall::errno::{EAGAIN, EBUSY, EDEADLK, EFAULT, EINVAL, EPERM, ESRCH, ETIMEDOUT};
use abi::syscall::{CPU_ANY, LOOKUP_BENCH_MAX, PRIO_MAX, UMTX_CONTESTED};
use core::sync::atomic::{AtomicU32, Ordering};

use super::usercopy::{check, Access};
use super::{err, Regs};
use crate::sync::pool::Align;
use crate::task::sched;
use crate::task::{sleepqueue, turnstile};
use crate::{kprintln, record};

pub extern "fastcall" fn sys_yield(r: &mut Regs) {
    let _g = sched::locked();
    sched::yield_now();
    r.eax = 0;
}

/// `sleep(ticks)`: a nap on no channel, so no `wakeup` can cut it short
/// (a channel of its own would be a number any thread could name); a
/// caught signal does: `-EINTR`, after its handler ran.
pub extern "fastcall" fn sys_sleep(r: &mut Regs) {
    let _g = sched::locked();
    r.eax = match crate::proc::sleep_interruptible(0, r.ebx.max(1) as u64) {
        crate::proc::Woken::Interrupted => err(abi::syscall::errno::EINTR),
        crate::proc::Woken::Done(_) => 0,
    };
    crate::proc::signal::on_return(r, r.eax, &super::usercopy::USER_MEM);
}

pub extern "fastcall" fn sys_thread_create(r: &mut Regs) {
    let _g = sched::locked();
    let (eip, esp, arg, prio, cpu) = (r.ebx, r.ecx, r.edx, r.esi, r.edi);
    if check(eip, 1, Access::Read).is_err() || check(esp.wrapping_sub(4), 4, Access::Write).is_err()
    {
        r.eax = err(EFAULT);
        return;
    }
    if prio > PRIO_MAX {
        r.eax = err(EINVAL);
        return;
    }
    let cpus = crate::arch::smp::cpus().started;
    let cpu = match cpu {
        CPU_ANY => sched::least_loaded(cpus),
        c if (c as usize) < cpus => c as usize,
        _ => {
            r.eax = err(EINVAL);
            return;
        }
    };
    let Some(proc) = sched::current_proc() else {
        r.eax = err(EINVAL);
        return;
    };
    r.eax = match sched::spawn_user(eip, esp, arg, prio, cpu, proc) {
        Ok(tid) => tid,
        Err(_) => err(EAGAIN),
    };
}

pub extern "fastcall" fn sys_thread_exit(r: &mut Regs) {
    // Held across the switch away; the next thread lets it go.
    core::mem::forget(sched::locked());
    // The thread is on its kernel stack now: its user stack may be reused
    // once the word says so (a bad address is ignored: the thread ends anyway).
    if r.ebx != 0 {
        if let Ok(w) = umtx_word(r.ebx) {
            // SAFETY: a checked, aligned, writable user word; the release
            // store pairs with the user's acquire load of it.
            unsafe { AtomicU32::from_ptr(w).store(0, Ordering::Release) };
        }
    }
    sched::exit_current()
}

/// `cpu()`: where the caller runs.
pub extern "fastcall" fn sys_cpu(r: &mut Regs) {
    r.eax = sched::cpu() as u32;
}

pub extern "fastcall" fn sys_gettid(r: &mut Regs) {
    let _g = sched::locked();
    r.eax = sched::current_tid();
}

pub extern "fastcall" fn sys_getprio(r: &mut Regs) {
    let _g = sched::locked();
    r.eax = match sched::index_of(r.ebx) {
        Some(i) => sched::thread(i).prio as u32,
        None => err(ESRCH),
    };
}

/// The user word of a umtx, checked: 4-aligned, mapped, writable.
fn umtx_word(addr: u32) -> Result<&'static mut u32, i32> {
    if addr % 4 != 0 {
        return Err(EINVAL);
    }
    check(addr, 4, Access::Write)?;
    // SAFETY: checked mapped, writable user memory, aligned. Other CPUs may
    // touch the word at once from ring 3 (its owner's fast path), which is
    // why the slow paths change it under the scheduler lock with atomic
    // operations on its address only (see `umtx_*`).
    Ok(unsafe { &mut *(addr as *mut u32) })
}

/// The slow path of a user mutex lock: the word was not 0. The word is
/// changed by compare-and-swap only: threads on other CPUs run the fast
/// paths on it from ring 3 meanwhile. Once `UMTX_CONTESTED` is set, no fast
/// path succeeds (they expect 0, or the bare owner tid), so the owner's
/// unlock comes here, behind the scheduler lock this thread holds until
/// it waits on the turnstile.
pub extern "fastcall" fn sys_umtx_lock(r: &mut Regs) {
    let _g = sched::locked();
    let addr = r.ebx;
    let me = sched::current_tid();
    r.eax = loop {
        let w = match umtx_word(addr) {
            // SAFETY: a checked, aligned, writable user word (umtx_word).
            Ok(w) => unsafe { AtomicU32::from_ptr(w) },
            Err(e) => break err(e),
        };
        let old = w.load(Ordering::Acquire);
        let owner = old & !UMTX_CONTESTED;
        if owner == 0 {
            let new = me | (old & UMTX_CONTESTED);
            if w.compare_exchange(old, new, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                break 0;
            }
            continue;
        }
        if owner == me {
            break err(EDEADLK);
        }
        if old & UMTX_CONTESTED == 0
            && w.compare_exchange(
                old,
                old | UMTX_CONTESTED,
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_err()
        {
            // The owner let go (or changed) meanwhile: look again.
            continue;
        }
        turnstile::wait(addr, sched::index_of(owner));
        // An unlock handed it over: the word names us now.
        match umtx_word(addr) {
            Ok(w) if *w & !UMTX_CONTESTED == me => break 0,
            Ok(_) => continue,
            Err(e) => break err(e),
        }
    };
}

/// The slow path of a user mutex unlock: hand it to the most urgent waiter.
pub extern "fastcall" fn sys_umtx_unlock(r: &mut Regs) {
    let _g = sched::locked();
    let addr = r.ebx;
    let me = sched::current_index();
    let w = match umtx_word(addr) {
        // SAFETY: a checked, aligned, writable user word (umtx_word).
        Ok(w) => unsafe { AtomicU32::from_ptr(w) },
        Err(e) => {
            r.eax = err(e);
            return;
        }
    };
    if w.load(Ordering::Acquire) & !UMTX_CONTESTED != sched::current_tid() {
        r.eax = err(EPERM);
        return;
    }
    // The caller owns the word: no fast path elsewhere can change it (they
    // expect 0, or their own tid), so a plain store hands it on.
    let next = match turnstile::lookup(addr).and_then(turnstile::signal) {
        Some(next) => {
            let more = turnstile::trywait(addr);
            sched::thread(next).tid | if more { UMTX_CONTESTED } else { 0 }
        }
        None => 0,
    };
    w.store(next, Ordering::Release);
    turnstile::recompute(me);
    r.eax = 0;
}

pub extern "fastcall" fn sys_sleep_on(r: &mut Regs) {
    let _g = sched::locked();
    let (chan, timeout) = (r.ebx, r.ecx);
    r.eax = if sleepqueue::sleep(chan, timeout as u64) {
        0
    } else {
        err(ETIMEDOUT)
    };
}

pub extern "fastcall" fn sys_wakeup(r: &mut Regs) {
    let _g = sched::locked();
    r.eax = sleepqueue::wakeup(r.ebx, r.ecx != 0);
}

pub extern "fastcall" fn sys_pool_align(r: &mut Regs) {
    let _g = sched::locked();
    let Some(a) = Align::from_bytes(r.ebx) else {
        r.eax = err(EINVAL);
        return;
    };
    if sched::user_threads() > 1 {
        r.eax = err(EBUSY);
        return;
    }
    // The pools hold the live threads' objects: set aside this thread's,
    // lay the pools out again, and take fresh ones.
    let me = sched::current_index();
    let t = sched::thread(me);
    if let Some(ts) = t.turnstile.take() {
        turnstile::free(ts);
    }
    if let Some(sq) = t.sleepqueue.take() {
        sleepqueue::free(sq);
    }
    let ok = turnstile::set_align(a) && sleepqueue::set_align(a);
    t.turnstile = turnstile::alloc();
    t.sleepqueue = sleepqueue::alloc();
    if !ok {
        r.eax = err(EBUSY);
        return;
    }
    let (size, stride, per64, per128) = turnstile::layout();
    let (qsize, qstride, q64, q128) = sleepqueue::layout();
    kprintln!(
        "pools: align {}: turnstile {size} bytes at stride {stride} ({per64} per 64-byte block, {per128} per 128); sleepqueue {qsize} at {qstride} ({q64} per 64, {q128} per 128)",
        a.key()
    );
    record!(kind::POOL, "align" => a.key(), "ts_size" => size, "ts_stride" => stride,
        "ts_per64" => per64, "ts_per128" => per128, "sq_size" => qsize, "sq_stride" => qstride,
        "sq_per64" => q64, "sq_per128" => q128);
    r.eax = 0;
}

/// `n` lookups of a lock that is not contested (the common miss), for timing.
/// The loop holds the scheduler lock with interrupts masked, so `n` is
/// bounded (`LOOKUP_BENCH_MAX`).
pub extern "fastcall" fn sys_lookup_bench(r: &mut Regs) {
    if r.ebx > LOOKUP_BENCH_MAX {
        r.eax = err(EINVAL);
        return;
    }
    let _g = sched::locked();
    let mut found = 0;
    for i in 0..r.ebx {
        found += turnstile::lookup(0x4000_0000 + 64 * (i & 1023)).is_some() as u32;
    }
    r.eax = found;
}
