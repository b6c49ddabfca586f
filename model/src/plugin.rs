//! The QEMU TCG plugin (API version 1, QEMU 7.2) around [`Machine`].
//!
//! QEMU loads `libmodel.so` with `-plugin libmodel.so,profile=NAME,
//! virt=on|ept|off,out=PATH[,pge=on|off]` and calls [`qemu_plugin_install`].
//! The plugin asks for a callback on every data access of each block QEMU
//! translates, and on every instruction the machine's plan
//! ([`Machine::plan`]) says needs one; the others (with one CPU, most
//! instructions inside a block) only add their count and cost to an
//! accumulator, by an inline add QEMU compiles into the block, which the
//! next callback empties into the model, crediting the vCPU of the last
//! callback (under `-icount` QEMU runs one vCPU at a time and switches
//! only between blocks, each of which starts with a call); with one CPU,
//! whose counters only add up, the next instruction's callback. The
//! instruction's class and cost are decoded once, there, and ride along
//! as the callback's user data, with the costs of the instructions inlined
//! after it (with several CPUs the model applies them one by one).
//! `reference=on` makes every instruction a call and every event wait in
//! its CPU's queue (`Machine::set_reference`): the plain, slow way the tests
//! compare the fast ways against (the same file, byte for byte).
//! `reference=shadow` (several CPUs) runs that reference machine beside the
//! fast one on the same events and writes its file too: a
//! `reference=on` boot's calls end QEMU's blocks elsewhere, so QEMU may hand
//! the vCPUs their turns at other instructions, and the two boots' models
//! then order different streams (each CPU's the same, their interleaving
//! not).
//! When QEMU exits, the snapshot file (`abi::model`) is written to `out`.
//!
//! What the callbacks do with their arguments is [`Feed`]'s, which holds
//! the machine and which the tests drive directly; this file only turns
//! QEMU's handles and pointers into those arguments.
//!
//! The QEMU functions are looked up with `dlsym` at install time rather than
//! linked: QEMU exports them from its executable, and a missing one gives a
//! clear refusal instead of a failed `dlopen`. The declarations below follow
//! the documented v1 API (include/qemu/qemu-plugin.h in QEMU 7.2).

use std::cell::{Cell, UnsafeCell};
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

use crate::machine::{Feed, Insn, Machine, Options, Site, Step};
use crate::profile;
use crate::profile::Virt;

/// The plugin API version this plugin is written against.
const API_VERSION: c_int = 1;

/// QEMU reads this symbol to check the plugin's API version.
#[allow(non_upper_case_globals)]
#[unsafe(no_mangle)]
pub static qemu_plugin_version: c_int = API_VERSION;

type PluginId = u64;
/// `qemu_plugin_meminfo_t`.
type MemInfo = u32;

/// Opaque QEMU handles.
#[repr(C)]
pub struct Tb {
    _private: [u8; 0],
}
#[repr(C)]
pub struct InsnHandle {
    _private: [u8; 0],
}
#[repr(C)]
pub struct Hwaddr {
    _private: [u8; 0],
}

/// `qemu_info_t`.
#[repr(C)]
pub struct QemuInfo {
    target_name: *const c_char,
    version_min: c_int,
    version_cur: c_int,
    system_emulation: bool,
    smp_vcpus: c_int,
    max_vcpus: c_int,
}

/// `enum qemu_plugin_cb_flags`: QEMU_PLUGIN_CB_NO_REGS.
const CB_NO_REGS: c_int = 0;
/// `enum qemu_plugin_op`: QEMU_PLUGIN_INLINE_ADD_U64.
const INLINE_ADD_U64: c_int = 0;
/// `enum qemu_plugin_mem_rw`: QEMU_PLUGIN_MEM_RW.
const MEM_RW: c_int = 3;

type TbTransCb = extern "C" fn(PluginId, *mut Tb);
type VcpuUdataCb = extern "C" fn(c_uint, *mut c_void);
type MemCb = extern "C" fn(c_uint, MemInfo, u64, *mut c_void);
type UdataCb = extern "C" fn(PluginId, *mut c_void);

/// The QEMU functions the plugin calls: the struct `Api` of their
/// pointers, and `Api::resolve`, which finds each as `qemu_plugin_<field>`.
macro_rules! api {
    ($($field:ident: $ty:ty,)*) => {
        struct Api {
            $($field: $ty,)*
        }

        impl Api {
            fn resolve() -> Result<Api, String> {
                Ok(Api {
                    $($field: {
                        let p = symbol(concat!("qemu_plugin_", stringify!($field)))?;
                        // SAFETY: the symbol is QEMU's function of that name,
                        // whose C signature (qemu-plugin.h, API v1) `$ty` spells.
                        unsafe { std::mem::transmute::<*mut c_void, $ty>(p) }
                    },)*
                })
            }
        }
    };
}

api! {
    register_vcpu_tb_trans_cb: extern "C" fn(PluginId, TbTransCb),
    tb_n_insns: extern "C" fn(*const Tb) -> usize,
    tb_get_insn: extern "C" fn(*const Tb, usize) -> *mut InsnHandle,
    insn_data: extern "C" fn(*const InsnHandle) -> *const c_void,
    insn_size: extern "C" fn(*const InsnHandle) -> usize,
    insn_vaddr: extern "C" fn(*const InsnHandle) -> u64,
    register_vcpu_insn_exec_cb: extern "C" fn(*mut InsnHandle, VcpuUdataCb, c_int, *mut c_void),
    register_vcpu_insn_exec_inline: extern "C" fn(*mut InsnHandle, c_int, *mut c_void, u64),
    register_vcpu_mem_cb: extern "C" fn(*mut InsnHandle, MemCb, c_int, c_int, *mut c_void),
    mem_is_store: extern "C" fn(MemInfo) -> bool,
    mem_size_shift: extern "C" fn(MemInfo) -> c_uint,
    get_hwaddr: extern "C" fn(MemInfo, u64) -> *mut Hwaddr,
    hwaddr_is_io: extern "C" fn(*const Hwaddr) -> bool,
    hwaddr_phys_addr: extern "C" fn(*const Hwaddr) -> u64,
    register_atexit_cb: extern "C" fn(PluginId, UdataCb, *mut c_void),
    outs: extern "C" fn(*const c_char),
}

/// Looks a QEMU function up in the running executable.
fn symbol(name: &str) -> Result<*mut c_void, String> {
    let c = CString::new(name).map_err(|e| e.to_string())?;
    // SAFETY: dlsym with RTLD_DEFAULT only reads the loaded objects' symbol
    // tables; `c` is a valid NUL-terminated string.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c.as_ptr()) };
    if p.is_null() {
        Err(format!(
            "this QEMU does not provide {name} (plugin API v{API_VERSION})"
        ))
    } else {
        Ok(p)
    }
}

static API: OnceLock<Api> = OnceLock::new();

/// A translated instruction, decoded, and the kinds of its last data
/// accesses: the user data of its memory callback, which finds the size
/// and direction of most accesses here (an instruction's reads are of one
/// kind, its writes of one) rather than asking QEMU (two calls). A slot
/// holds an `info` (u64::MAX: none), its size and whether it is a store;
/// only the thread that owns the state reads or writes them (inside
/// `with_state`).
struct Interned {
    insn: Insn,
    kinds: [Cell<(u64, u32, bool)>; 2],
}

// SAFETY: `kinds` is only reached from the thread that owns the state,
// inside `Owned::with` (on_mem), one callback at a time, as the
// state itself is; `insn` is never written after the translation.
unsafe impl Sync for Interned {}

impl Interned {
    /// The size and direction of `info` if one of the slots holds it.
    #[inline(always)]
    fn kind(&self, info: MemInfo) -> Option<(u32, bool)> {
        let [a, b] = [self.kinds[0].get(), self.kinds[1].get()];
        if a.0 == u64::from(info) {
            Some((a.1, a.2))
        } else if b.0 == u64::from(info) {
            Some((b.1, b.2))
        } else {
            None
        }
    }

    /// The size and direction of `info`, asked of QEMU (no slot holds
    /// it), and then remembered: a load's in the first slot, a store's in
    /// the second.
    #[cold]
    #[inline(never)]
    fn ask(&self, api: &Api, info: MemInfo) -> (u32, bool) {
        let size = 1u32 << (api.mem_size_shift)(info);
        let store = (api.mem_is_store)(info);
        self.kinds[usize::from(store)].set((u64::from(info), size, store));
        (size, store)
    }
}

/// What the inline adds of [`Step::Inline`] instructions sum to (packed:
/// `machine::INLINE_INSN_SHIFT`); QEMU's generated code adds to it
/// directly, and [`take_inline`] empties it into the model.
static INLINE: AtomicU64 = AtomicU64::new(0);

/// Everything the callbacks share, reached from the one thread that runs
/// the vCPUs under `-icount` ([`Owned`]).
struct State {
    /// The machine, fed as the callbacks come.
    feed: Feed,
    out: PathBuf,
    /// Where the reference machine's file goes (`reference=shadow`).
    shadow_out: Option<PathBuf>,
    ncpus: usize,
    /// Decoded instructions, one per (address, bytes): their addresses are
    /// the memory callbacks' user data and live as long as QEMU.
    interned: HashMap<(u32, Vec<u8>), &'static Interned>,
    /// Call sites, one per (instruction, inlined costs after it).
    sites: HashMap<(usize, Vec<u32>), &'static Site>,
}

/// The plugin's state, reached only from the thread that runs the vCPUs.
///
/// The model needs QEMU's single-threaded TCG (`-icount`, which every
/// `--clock model` boot uses): one thread runs every vCPU in turn, and the
/// inline accumulator and the clock order both assume it. That thread
/// takes the state at its first callback; a callback from any other thread
/// (multi-threaded TCG) is refused and counted, and the file then says so
/// instead of giving figures. So the hot callbacks take no lock (a spin
/// lock was an atomic read-modify-write on each of some 320 million
/// callbacks of a default run).
struct Owned<T> {
    value: UnsafeCell<T>,
}

// SAFETY: the value is only reached through `with`, from the owner thread
// (or, at exit, from a thread that runs while the vCPUs are stopped).
unsafe impl<T: Send> Sync for Owned<T> {}

/// The owner: [`this_thread`] of the thread that runs the vCPUs, 0 before
/// the first callback.
static OWNER: AtomicUsize = AtomicUsize::new(0);
/// Callbacks refused because they came from another thread.
static STRANGERS: AtomicU64 = AtomicU64::new(0);

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
thread_local! {
    /// One byte per thread; its address names the thread while it lives
    /// (QEMU's vCPU threads live until QEMU exits).
    static HERE: u8 = const { 0 };
}

/// A number that names the calling thread while it lives.
#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
fn this_thread() -> usize {
    HERE.with(|b| b as *const u8 as usize)
}

/// A number that names the calling thread while it lives: its thread
/// pointer. In a shared object `HERE`'s address costs a call of
/// `__tls_get_addr` (as much as the lock it replaces); the thread pointer
/// is one load.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[inline(always)]
fn this_thread() -> usize {
    let tp: usize;
    // SAFETY: on x86-64 the FS base is the thread pointer, and the word it
    // points to holds the thread pointer itself (the ELF TLS ABI's variant
    // II, which glibc and musl follow): one read of the thread's own
    // control block, which lives as long as the thread.
    unsafe {
        std::arch::asm!(
            "mov {}, qword ptr fs:[0]",
            out(reg) tp,
            options(nostack, readonly, preserves_flags, pure)
        )
    };
    tp
}

impl<T> Owned<T> {
    const fn new(value: T) -> Owned<T> {
        Owned {
            value: UnsafeCell::new(value),
        }
    }

    /// `f` on the value if this thread owns it (the first to ask does).
    #[inline(always)]
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        let me = this_thread();
        let owner = OWNER.load(Ordering::Relaxed);
        if owner != me
            && (owner != 0
                || OWNER
                    .compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed)
                    .is_err())
        {
            STRANGERS.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        // SAFETY: only the owner thread gets here, one callback at a time
        // (QEMU does not re-enter a plugin callback), so no other
        // reference to the value exists.
        Some(f(unsafe { &mut *self.value.get() }))
    }

    /// Sets the value while no vCPU runs yet (plugin install).
    fn install(&self, value: T) {
        // SAFETY: QEMU installs plugins while it parses its command line,
        // before it creates a vCPU thread: nothing else reaches the value.
        unsafe { *self.value.get() = value }
    }

    /// `f` on the value from whichever thread QEMU exits on: the owner
    /// thread itself (the guest's exit port), or the main thread after it
    /// stopped every vCPU (a shutdown request: QEMU pauses the vCPUs before
    /// its atexit handlers run). The owner is handed over first, so a
    /// callback that still came from the old owner would be refused.
    fn at_exit<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        OWNER.store(this_thread(), Ordering::SeqCst);
        // SAFETY: as the doc says, no vCPU callback runs while QEMU exits,
        // and later ones are refused (the owner is now this thread).
        f(unsafe { &mut *self.value.get() })
    }
}

static STATE: Owned<Option<State>> = Owned::new(None);

#[inline(always)]
fn with_state(f: impl FnOnce(&mut State)) {
    STATE.with(|s| {
        if let Some(s) = s.as_mut() {
            f(s);
        }
    });
}

/// The plugin's arguments.
#[derive(Debug, PartialEq, Eq)]
pub struct Args {
    pub profile: String,
    pub opts: Options,
    pub out: PathBuf,
    /// Every instruction a call, nothing inlined (the tests' reference).
    pub reference: bool,
    /// The reference machine beside the fast one (`reference=shadow`).
    pub shadow: bool,
}

fn on_off(key: &str, v: &str) -> Result<bool, String> {
    match v {
        "on" | "true" | "yes" => Ok(true),
        "off" | "false" | "no" => Ok(false),
        _ => Err(format!("{key}={v}: expected on or off")),
    }
}

/// Parses `key=value` plugin arguments.
pub fn parse_args<'a>(args: impl IntoIterator<Item = &'a str>) -> Result<Args, String> {
    let (mut profile, mut out) = (None, None);
    let mut opts = Options::default();
    let (mut reference, mut shadow) = (false, false);
    for a in args {
        let (k, v) = a
            .split_once('=')
            .ok_or_else(|| format!("argument {a:?}: expected key=value"))?;
        match k {
            "profile" => profile = Some(v.to_string()),
            "out" => out = Some(PathBuf::from(v)),
            "virt" => {
                opts.virt = Virt::parse(v)
                    .ok_or_else(|| format!("{k}={v}: expected on (shadow), ept or off"))?
            }
            "pge" => opts.pge = on_off(k, v)?,
            "reference" if v == "shadow" => shadow = true,
            "reference" => reference = on_off(k, v)?,
            _ => {
                return Err(format!(
                    "unknown argument {k} (known: profile, virt, pge, reference, out)"
                ))
            }
        }
    }
    Ok(Args {
        profile: profile.ok_or("missing profile=NAME")?,
        opts,
        out: out.ok_or("missing out=PATH")?,
        reference,
        shadow,
    })
}

/// Whether this QEMU can serve the plugin: API version 1 within what it
/// serves, system emulation, an x86 guest.
pub fn check_qemu(min: i32, cur: i32, system: bool, target: &str) -> Result<(), String> {
    if cur < API_VERSION || min > API_VERSION {
        return Err(format!(
            "this QEMU serves plugin API versions {min} to {cur}; the model needs version {API_VERSION}"
        ));
    }
    if !system {
        return Err("the model needs system emulation (qemu-system-*), not user mode".into());
    }
    if target != "i386" && target != "x86_64" {
        return Err(format!("the model is for x86 guests, not {target}"));
    }
    Ok(())
}

fn install(info: &QemuInfo, args: &[&str]) -> Result<(), String> {
    // SAFETY: QEMU passes a NUL-terminated target name, live during install.
    let target = unsafe { CStr::from_ptr(info.target_name) }.to_string_lossy();
    check_qemu(
        info.version_min,
        info.version_cur,
        info.system_emulation,
        &target,
    )?;
    let a = parse_args(args.iter().copied())?;
    let profile = profile::find(&a.profile)?;
    let ncpus = info.smp_vcpus.max(1) as usize;
    let shadow = if a.shadow {
        // With one CPU the fast ways skip the calls the shadow is fed from.
        if ncpus < 2 {
            return Err("reference=shadow needs several CPUs".into());
        }
        let mut machine = Machine::new(profile.clone(), a.opts, ncpus)?;
        machine.set_reference(true);
        Some(machine)
    } else {
        None
    };
    let mut machine = Machine::new(profile, a.opts, ncpus)?;
    machine.set_reference(a.reference);
    let api = Api::resolve()?;
    // A first check that the output file can be written, before the boot.
    std::fs::write(&a.out, "").map_err(|e| format!("cannot write {}: {e}", a.out.display()))?;
    let state = State {
        shadow_out: shadow.is_some().then(|| crate::shadow_path(&a.out)),
        feed: Feed::new(machine, shadow),
        out: a.out,
        ncpus,
        interned: HashMap::new(),
        sites: HashMap::new(),
    };
    STATE.install(Some(state));
    API.get_or_init(|| api);
    Ok(())
}

/// QEMU calls this when it loads the plugin; non-zero refuses the load.
///
/// # Safety
/// QEMU passes a valid `info` and `argc` NUL-terminated strings in `argv`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qemu_plugin_install(
    id: PluginId,
    info: *const QemuInfo,
    argc: c_int,
    argv: *const *const c_char,
) -> c_int {
    // SAFETY: the caller's contract (above).
    let args: Vec<String> = (0..argc.max(0) as usize)
        .map(|i| {
            unsafe { CStr::from_ptr(*argv.add(i)) }
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // SAFETY: the caller's contract (above).
    let info = unsafe { &*info };
    match install(info, &args) {
        Ok(()) => {
            let api = API.get().expect("set by install");
            (api.register_vcpu_tb_trans_cb)(id, on_translate);
            (api.register_atexit_cb)(id, on_exit, std::ptr::null_mut());
            0
        }
        Err(e) => {
            eprintln!("model plugin: {e}");
            1
        }
    }
}

extern "C" fn on_translate(_id: PluginId, tb: *mut Tb) {
    let Some(api) = API.get() else { return };
    let n = (api.tb_n_insns)(tb);
    with_state(|s| {
        let mut block = Vec::with_capacity(n);
        for i in 0..n {
            let h = (api.tb_get_insn)(tb, i);
            let size = (api.insn_size)(h);
            let data = (api.insn_data)(h) as *const u8;
            // SAFETY: QEMU's instruction bytes, `size` long, live during the
            // translation callback.
            let bytes = unsafe { std::slice::from_raw_parts(data, size) };
            let vaddr = (api.insn_vaddr)(h) as u32;
            let machine = &s.feed.machine;
            let interned: &'static Interned = s
                .interned
                .entry((vaddr, bytes.to_vec()))
                .or_insert_with(|| {
                    Box::leak(Box::new(Interned {
                        insn: machine.decode(bytes, vaddr),
                        kinds: [
                            Cell::new((u64::MAX, 0, false)),
                            Cell::new((u64::MAX, 0, false)),
                        ],
                    }))
                });
            block.push((h, interned));
        }
        let insns: Vec<Insn> = block.iter().map(|(_, i)| i.insn).collect();
        for ((h, interned), (step, run)) in block.iter().zip(s.feed.plan(&insns)) {
            match step {
                Step::Call => {
                    let key = (*interned as *const Interned as usize, run);
                    let site: &'static Site = match s.sites.get(&key) {
                        Some(site) => site,
                        None => {
                            let site = Box::leak(Box::new(Site {
                                insn: interned.insn,
                                run: Box::leak(key.1.clone().into_boxed_slice()),
                            }));
                            s.sites.insert(key, site);
                            site
                        }
                    };
                    let udata = site as *const Site as *mut c_void;
                    (api.register_vcpu_insn_exec_cb)(*h, on_exec, CB_NO_REGS, udata);
                }
                Step::Inline(add) => (api.register_vcpu_insn_exec_inline)(
                    *h,
                    INLINE_ADD_U64,
                    INLINE.as_ptr() as *mut c_void,
                    add,
                ),
            }
            let udata = *interned as *const Interned as *mut c_void;
            (api.register_vcpu_mem_cb)(*h, on_mem, CB_NO_REGS, MEM_RW, udata);
        }
    });
}

/// Empties the inline accumulator (what QEMU's inline adds counted since
/// the last call).
fn take_inline() -> u64 {
    // Under -icount one thread runs every vCPU, and it runs this: a plain
    // load and store.
    let acc = INLINE.load(Ordering::Relaxed);
    if acc != 0 {
        INLINE.store(0, Ordering::Relaxed);
    }
    acc
}

extern "C" fn on_exec(vcpu: c_uint, udata: *mut c_void) {
    // SAFETY: `udata` is an interned, leaked `Site` (on_translate).
    let site = unsafe { &*(udata as *const Site) };
    with_state(|s| s.feed.on_exec(vcpu as usize, site, take_inline()));
}

extern "C" fn on_mem(vcpu: c_uint, info: MemInfo, vaddr: u64, udata: *mut c_void) {
    // SAFETY: `udata` is an interned, leaked `Interned` (on_translate).
    let interned = unsafe { &*(udata as *const Interned) };
    with_state(|s| {
        // Most accesses are of a kind the instruction made before; the
        // others ask QEMU (two calls), once.
        let (size, store, known) = match interned.kind(info) {
            Some((size, store)) => (size, store, true),
            None => {
                let Some(api) = API.get() else { return };
                let (size, store) = interned.ask(api, info);
                (size, store, false)
            }
        };
        s.feed.on_mem(
            vcpu as usize,
            vaddr as u32,
            size,
            store,
            known,
            take_inline,
            || translate(info, vaddr),
        );
    });
}

/// The physical address QEMU gives `vaddr` (None: MMIO), asked once per
/// page until the next flush (a call apart from the accesses' path).
#[cold]
#[inline(never)]
fn translate(info: MemInfo, vaddr: u64) -> Option<u64> {
    let api = API.get()?;
    let h = (api.get_hwaddr)(info, vaddr);
    if h.is_null() || (api.hwaddr_is_io)(h) {
        None
    } else {
        Some((api.hwaddr_phys_addr)(h))
    }
}

/// The file's one line when callbacks came from several threads.
fn refusal(strangers: u64) -> String {
    format!(
        "error QEMU ran the vCPUs on several threads ({strangers} callbacks refused): the model needs single-threaded TCG (-icount)"
    )
}

extern "C" fn on_exit(_id: PluginId, _udata: *mut c_void) {
    let Some(api) = API.get() else { return };
    STATE.at_exit(|s| {
        let Some(s) = s.as_mut() else { return };
        s.feed.finish(take_inline());
        if let (Some(text), Some(path)) = (s.feed.shadow_report(s.ncpus), &s.shadow_out) {
            if let Err(e) = std::fs::write(path, text) {
                let msg = CString::new(format!(
                    "model plugin: cannot write {}: {e}\n",
                    path.display()
                ))
                .unwrap_or_default();
                (api.outs)(msg.as_ptr());
            }
        }
        let mut notes = Vec::new();
        if s.feed.machine.forced() > 0 {
            notes.push(format!(
                "model plugin: {} events were applied out of clock order (more than {} waited)\n",
                s.feed.machine.forced(),
                crate::machine::MAX_BUFFERED
            ));
        }
        for (cpu, stream, dropped) in s.feed.machine.capped() {
            notes.push(format!(
                "model plugin: CPU {cpu} stream {stream}: {dropped} snapshots past the first {} dropped (the figures that need them are incomplete)\n",
                abi::model::MAX_SNAPS_PER_STREAM
            ));
        }
        let strangers = STRANGERS.load(Ordering::SeqCst);
        let text = if strangers > 0 {
            // Part of the boot was not seen: no figures.
            format!("{}\n", refusal(strangers))
        } else {
            s.feed.machine.report(s.ncpus)
        };
        if let Err(e) = std::fs::write(&s.out, text) {
            notes.push(format!(
                "model plugin: cannot write {}: {e}\n",
                s.out.display()
            ));
        }
        for n in notes {
            let msg = CString::new(n).unwrap_or_default();
            (api.outs)(msg.as_ptr());
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments() {
        let a = parse_args(["profile=p4", "virt=on", "out=/tmp/m.txt"]).unwrap();
        assert_eq!(a.profile, "p4");
        assert!(a.opts.virt == Virt::Shadow && !a.opts.pge);
        let ept = parse_args(["profile=p4", "virt=ept", "out=x"]).unwrap();
        assert_eq!(ept.opts.virt, Virt::Ept);
        assert_eq!(a.out, PathBuf::from("/tmp/m.txt"));
        assert!(parse_args(["profile=p4"])
            .unwrap_err()
            .contains("missing out"));
        assert!(parse_args(["out=x"])
            .unwrap_err()
            .contains("missing profile"));
        assert!(parse_args(["virt=maybe", "profile=p4", "out=x"])
            .unwrap_err()
            .contains("expected on (shadow), ept or off"));
        assert!(parse_args(["speed=3"])
            .unwrap_err()
            .contains("unknown argument speed"));
        assert!(parse_args(["p4"]).unwrap_err().contains("key=value"));
        let both = parse_args(["profile=p4", "reference=shadow", "out=x"]).unwrap();
        assert!(both.shadow && !both.reference);
    }

    #[test]
    fn callbacks_from_several_threads_give_no_figures() {
        let e = crate::report::parse(&format!("{}\n", refusal(3))).unwrap_err();
        assert!(
            e.contains("no figures") && e.contains("3 callbacks refused"),
            "{e}"
        );
        assert!(e.contains("single-threaded TCG (-icount)"), "{e}");
    }

    #[test]
    fn qemu_versions() {
        assert!(check_qemu(0, 1, true, "i386").is_ok());
        assert!(check_qemu(0, 2, true, "x86_64").is_ok());
        let e = check_qemu(2, 3, true, "i386").unwrap_err();
        assert!(
            e.contains("versions 2 to 3; the model needs version 1"),
            "{e}"
        );
        assert!(check_qemu(0, 0, true, "i386").is_err());
        assert!(check_qemu(0, 1, false, "i386")
            .unwrap_err()
            .contains("system emulation"));
        assert!(check_qemu(0, 1, true, "aarch64")
            .unwrap_err()
            .contains("not aarch64"));
    }
}
