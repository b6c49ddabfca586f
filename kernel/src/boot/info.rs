//! [`BootInfo`]: what the loader told us, the same whichever protocol it spoke.
//!
//! Multiboot 1 (QEMU `-kernel`) passes a flat structure full of physical
//! pointers; Multiboot 2 (GRUB `multiboot2`) a list of tags, which the
//! `multiboot2` crate walks. Both become one [`BootInfo`].
//!
//! This file uses only `core` and `multiboot2`, so the host tests include it
//! (`xtask/tests/bootinfo.rs`) and feed it captured structures.

use multiboot2::{BootInformation, BootInformationHeader, MemoryAreaType};

/// EAX at entry from a Multiboot 1 loader.
pub const MB1_MAGIC: u32 = 0x2BAD_B002;
/// EAX at entry from a Multiboot 2 loader.
pub const MB2_MAGIC: u32 = 0x36D7_6289;

pub const MAX_REGIONS: usize = 32;
pub use abi::layout::MAX_MODULES;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Multiboot1,
    Multiboot2,
}

impl Protocol {
    pub fn key(self) -> &'static str {
        match self {
            Protocol::Multiboot1 => "mb1",
            Protocol::Multiboot2 => "mb2",
        }
    }
}

/// A range of usable RAM, `[start, end)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Region {
    pub start: u64,
    pub end: u64,
}

/// A Multiboot module: a user program's ELF image.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Module<'a> {
    pub start: u32,
    pub end: u32,
    /// The module's name: the last word of its command line, without any
    /// directory (QEMU passes "path/to/bench", GRUB the words after the path).
    pub name: &'a str,
}

#[derive(Clone, Debug)]
pub struct BootInfo<'a> {
    pub protocol: Protocol,
    pub loader: &'a str,
    pub cmdline: &'a str,
    regions: [Region; MAX_REGIONS],
    nregions: usize,
    modules: [Module<'a>; MAX_MODULES],
    nmodules: usize,
    /// Modules the loader passed past the first [`MAX_MODULES`]: not kept.
    dropped_modules: u32,
    /// Where the information structure itself lies.
    pub info_start: u32,
    pub info_end: u32,
    /// Every piece of loader memory the parsed values still point into (the
    /// structure, strings, lists), so no frame is handed out over them.
    extents: [(u32, u32); MAX_EXTENTS],
    nextents: usize,
}

pub const MAX_EXTENTS: usize = 8 + MAX_MODULES;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BootInfoError {
    /// EAX held neither magic.
    BadMagic(u32),
    /// The structure could not be read (a pointer outside memory, a bad tag).
    Malformed(&'static str),
}

/// Physical memory as the parser sees it: the identity map in the kernel, a
/// captured image in tests.
pub trait PhysMem<'a> {
    /// `len` bytes at physical address `addr`, or `None` outside memory.
    fn bytes(&self, addr: u32, len: u32) -> Option<&'a [u8]>;

    /// A NUL-terminated string at `addr` (at most `abi::cmdline::MAX_LEN`
    /// bytes before the NUL), as UTF-8.
    fn c_str(&self, addr: u32) -> Option<&'a str> {
        for len in 0..=abi::cmdline::MAX_LEN as u32 {
            if self.bytes(addr + len, 1)?[0] == 0 {
                return core::str::from_utf8(self.bytes(addr, len)?).ok();
            }
        }
        None
    }
}

impl<'a> BootInfo<'a> {
    fn empty(protocol: Protocol) -> Self {
        BootInfo {
            protocol,
            loader: "unknown",
            cmdline: "",
            regions: [Region::default(); MAX_REGIONS],
            nregions: 0,
            modules: [Module::default(); MAX_MODULES],
            nmodules: 0,
            dropped_modules: 0,
            info_start: 0,
            info_end: 0,
            extents: [(0, 0); MAX_EXTENTS],
            nextents: 0,
        }
    }

    fn keep(&mut self, start: u32, len: u32) {
        if self.nextents < MAX_EXTENTS {
            self.extents[self.nextents] = (start, start.saturating_add(len));
            self.nextents += 1;
        }
    }

    /// Loader memory that must not be reused while this `BootInfo` lives.
    pub fn extents(&self) -> &[(u32, u32)] {
        &self.extents[..self.nextents]
    }

    /// QEMU's Multiboot 1 loader puts the kernel's file name before the
    /// arguments; GRUB does the same for `multiboot`. A first word with a
    /// `/` and no `=` is that name, not an option.
    fn strip_image_name(cmdline: &str) -> &str {
        let t = cmdline.trim_start();
        match t.split_once(' ') {
            Some((first, rest)) if first.contains('/') && !first.contains('=') => rest,
            None if t.contains('/') && !t.contains('=') => "",
            _ => cmdline,
        }
    }

    /// Parses the hand-off of either protocol.
    ///
    /// # Safety
    /// For [`MB2_MAGIC`], `info` must point to a valid Multiboot 2 structure
    /// that lives for `'a` at its own address in `mem`.
    pub unsafe fn parse(
        magic: u32,
        info: u32,
        mem: &impl PhysMem<'a>,
    ) -> Result<Self, BootInfoError> {
        match magic {
            MB1_MAGIC => Self::from_multiboot1(info, mem),
            // SAFETY: the caller guarantees the structure for this magic,
            // at its own (identity-mapped) address.
            MB2_MAGIC => unsafe {
                Self::from_multiboot2(info as usize as *const BootInformationHeader, info, mem)
            },
            other => Err(BootInfoError::BadMagic(other)),
        }
    }

    /// Multiboot 1 information structure (Multiboot spec 0.6.96 §3.3).
    pub fn from_multiboot1(info: u32, mem: &impl PhysMem<'a>) -> Result<Self, BootInfoError> {
        const FLAG_CMDLINE: u32 = 1 << 2;
        const FLAG_MODS: u32 = 1 << 3;
        const FLAG_MMAP: u32 = 1 << 6;
        const FLAG_LOADER: u32 = 1 << 9;
        const INFO_SIZE: u32 = 88;
        let bad = BootInfoError::Malformed;
        let raw = mem.bytes(info, INFO_SIZE).ok_or(bad("info structure"))?;
        let word = |off: usize| u32::from_le_bytes(raw[off..off + 4].try_into().unwrap());
        let flags = word(0);
        let mut bi = Self::empty(Protocol::Multiboot1);
        bi.info_start = info;
        bi.info_end = info + INFO_SIZE;
        bi.keep(info, INFO_SIZE);
        if flags & FLAG_CMDLINE != 0 {
            let c = mem.c_str(word(16)).ok_or(bad("command line"))?;
            bi.keep(word(16), c.len() as u32 + 1);
            bi.cmdline = Self::strip_image_name(c);
        }
        if flags & FLAG_LOADER != 0 {
            bi.loader = mem.c_str(word(64)).ok_or(bad("loader name"))?;
            bi.keep(word(64), bi.loader.len() as u32 + 1);
        }
        if flags & FLAG_MODS != 0 {
            let (count, addr) = (word(20), word(24));
            let kept = count.min(MAX_MODULES as u32);
            bi.dropped_modules = count - kept;
            bi.keep(addr, kept * 16);
            for i in 0..kept {
                let m = mem.bytes(addr + i * 16, 16).ok_or(bad("module list"))?;
                let w = |off: usize| u32::from_le_bytes(m[off..off + 4].try_into().unwrap());
                let cmd = if w(8) != 0 {
                    mem.c_str(w(8)).unwrap_or("")
                } else {
                    ""
                };
                if w(8) != 0 {
                    bi.keep(w(8), cmd.len() as u32 + 1);
                }
                bi.push_module(w(0), w(4), cmd);
            }
        }
        if flags & FLAG_MMAP != 0 {
            let (len, addr) = (word(44), word(48));
            bi.keep(addr, len);
            let mut off = 0;
            // Each entry: size (not counting itself), base u64, length u64, type u32.
            while off + 24 <= len {
                let e = mem.bytes(addr + off, 24).ok_or(bad("memory map"))?;
                let size = u32::from_le_bytes(e[0..4].try_into().unwrap());
                let base = u64::from_le_bytes(e[4..12].try_into().unwrap());
                let length = u64::from_le_bytes(e[12..20].try_into().unwrap());
                let kind = u32::from_le_bytes(e[20..24].try_into().unwrap());
                if kind == 1 {
                    bi.push_region(base, length);
                }
                if size < 20 {
                    return Err(bad("memory map entry size"));
                }
                off += size + 4;
            }
        }
        Ok(bi)
    }

    /// Multiboot 2 boot information (Multiboot2 spec §3.6), through the
    /// `multiboot2` crate. `ptr` is where the structure is readable, `info`
    /// its physical address (the same in the kernel; not in host tests).
    ///
    /// # Safety
    /// `ptr` must point to a valid structure that lives for `'a`, which
    /// `mem` shows at `info`.
    pub unsafe fn from_multiboot2(
        ptr: *const BootInformationHeader,
        info: u32,
        mem: &impl PhysMem<'a>,
    ) -> Result<Self, BootInfoError> {
        let bad = BootInfoError::Malformed;
        // SAFETY: the caller guarantees a valid, live structure at `ptr`.
        let mbi = unsafe { BootInformation::load(ptr) }.map_err(|_| bad("multiboot2 structure"))?;
        let total = mbi.total_size() as u32;
        // Re-borrow the strings through `mem` so they live for 'a, not for
        // the `BootInformation` value.
        let mut bi = Self::empty(Protocol::Multiboot2);
        bi.info_start = info;
        bi.info_end = info + total;
        bi.keep(info, total);
        let restr = |s: &str| -> &'a str {
            let off = s.as_ptr() as usize - ptr as usize;
            mem.bytes(info + off as u32, s.len() as u32)
                .and_then(|b| core::str::from_utf8(b).ok())
                .unwrap_or("")
        };
        if let Some(c) = mbi.command_line_tag() {
            bi.cmdline =
                Self::strip_image_name(restr(c.cmdline().map_err(|_| bad("command line"))?));
        }
        if let Some(l) = mbi.boot_loader_name_tag() {
            bi.loader = restr(l.name().map_err(|_| bad("loader name"))?);
        }
        for m in mbi.module_tags() {
            let cmd = m.cmdline().map(restr).unwrap_or("");
            bi.push_module(m.start_address(), m.end_address(), cmd);
        }
        if let Some(map) = mbi.memory_map_tag() {
            for a in map.memory_areas() {
                if a.typ() == MemoryAreaType::Available {
                    bi.push_region(a.start_address(), a.size());
                }
            }
        }
        Ok(bi)
    }

    fn push_region(&mut self, base: u64, len: u64) {
        if self.nregions < MAX_REGIONS && len > 0 {
            self.regions[self.nregions] = Region {
                start: base,
                end: base.saturating_add(len),
            };
            self.nregions += 1;
        }
    }

    /// Keeps one more module, or counts it dropped past [`MAX_MODULES`].
    fn push_module(&mut self, start: u32, end: u32, cmdline: &'a str) {
        if self.nmodules < MAX_MODULES {
            let last = cmdline.split_ascii_whitespace().last().unwrap_or("");
            let name = last.rsplit('/').next().unwrap_or("");
            self.modules[self.nmodules] = Module { start, end, name };
            self.nmodules += 1;
        } else {
            self.dropped_modules = self.dropped_modules.saturating_add(1);
        }
    }

    /// Usable RAM regions.
    pub fn regions(&self) -> &[Region] {
        &self.regions[..self.nregions]
    }

    pub fn modules(&self) -> &[Module<'a>] {
        &self.modules[..self.nmodules]
    }

    /// How many modules the loader passed past the first [`MAX_MODULES`]:
    /// dropped, never run (the kernel announces them at boot).
    pub fn dropped_modules(&self) -> u32 {
        self.dropped_modules
    }

    pub fn module(&self, name: &str) -> Option<&Module<'a>> {
        self.modules().iter().find(|m| m.name == name)
    }

    /// Total usable RAM in KiB.
    pub fn memory_kib(&self) -> u64 {
        self.regions()
            .iter()
            .map(|r| (r.end - r.start) / 1024)
            .sum()
    }

    /// One past the highest usable byte of RAM.
    pub fn memory_end(&self) -> u64 {
        self.regions().iter().map(|r| r.end).max().unwrap_or(0)
    }
}
