//! System calls for threads, user mutexes (umtx) and sleep/wakeup.

use abi::report::kind;
use abi::syscall::errno::{EAGAIN, EBUSY, EDEADLK, EFAULT, EINVAL, EPERM, ESRCH, ETIMEDOUT};
use abi::syscall::{LOOKUP_BENCH_MAX, PRIO_MAX, UMTX_CONTESTED};

use super::usercopy::{check, Access};
use super::{err, Regs};
use crate::sync::pool::Align;
use crate::sync::{sleepqueue, turnstile};
use crate::task::sched;
use crate::{kprintln, record};

pub extern "fastcall" fn sys_yield(r: &mut Regs) {
    let _g = sched::locked();
    sched::yield_now();
    r.eax = 0;
}

/// `sleep(ticks)`: a nap on no channel, so no `wakeup` can cut it short
/// (a channel of its own would be a number any thread could name).
pub extern "fastcall" fn sys_sleep(r: &mut Regs) {
    let _g = sched::locked();
    sched::nap(r.ebx.max(1) as u64);
    r.eax = 0;
}

pub extern "fastcall" fn sys_thread_create(r: &mut Regs) {
    let _g = sched::locked();
    let (eip, esp, arg, prio) = (r.ebx, r.ecx, r.edx, r.esi);
    if check(eip, 1, Access::Read).is_err() || check(esp.wrapping_sub(4), 4, Access::Write).is_err()
    {
        r.eax = err(EFAULT);
        return;
    }
    if prio > PRIO_MAX {
        r.eax = err(EINVAL);
        return;
    }
    r.eax = match sched::spawn_user(eip, esp, arg, prio) {
        Ok(tid) => tid,
        Err(_) => err(EAGAIN),
    };
}

pub extern "fastcall" fn sys_thread_exit(_r: &mut Regs) {
    // Held across the switch away; the next thread lets it go.
    core::mem::forget(sched::locked());
    sched::exit_current()
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
    // SAFETY: checked mapped, writable user memory, aligned; one CPU.
    Ok(unsafe { &mut *(addr as *mut u32) })
}

/// The slow path of a user mutex lock: the word was not 0.
pub extern "fastcall" fn sys_umtx_lock(r: &mut Regs) {
    let _g = sched::locked();
    let addr = r.ebx;
    let me = sched::current_tid();
    r.eax = loop {
        let w = match umtx_word(addr) {
            Ok(w) => w,
            Err(e) => break err(e),
        };
        let owner = *w & !UMTX_CONTESTED;
        if owner == 0 {
            *w = me | (*w & UMTX_CONTESTED);
            break 0;
        }
        if owner == me {
            break err(EDEADLK);
        }
        *w |= UMTX_CONTESTED;
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
        Ok(w) => w,
        Err(e) => {
            r.eax = err(e);
            return;
        }
    };
    if *w & !UMTX_CONTESTED != sched::current_tid() {
        r.eax = err(EPERM);
        return;
    }
    *w = match turnstile::lookup(addr).and_then(turnstile::signal) {
        Some(next) => {
            let more = turnstile::trywait(addr);
            sched::thread(next).tid | if more { UMTX_CONTESTED } else { 0 }
        }
        None => 0,
    };
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
