//! The kernel's BootInfo parser (kernel/src/boot/info.rs, pure `core` +
//! `multiboot2`) fed Multiboot 1 and 2 structures laid out as QEMU 7.2's
//! `-kernel` loader and GRUB 2's `multiboot2` pass them.

#[allow(dead_code)]
#[path = "../../kernel/src/boot/info.rs"]
mod info;

use info::{BootInfo, BootInfoError, PhysMem, Protocol, MB1_MAGIC, MB2_MAGIC};

/// A captured piece of physical memory starting at `base`.
struct Capture {
    base: u32,
    bytes: Vec<u8>,
}

impl<'a> PhysMem<'a> for &'a Capture {
    fn bytes(&self, addr: u32, len: u32) -> Option<&'a [u8]> {
        let off = addr.checked_sub(self.base)? as usize;
        self.bytes.get(off..off.checked_add(len as usize)?)
    }
}

fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_str(b: &mut [u8], at: usize, s: &str) {
    b[at..at + s.len()].copy_from_slice(s.as_bytes());
    b[at + s.len()] = 0;
}

const BASE: u32 = 0x9000;

/// The Multiboot 1 hand-off: info structure, command line (QEMU puts the
/// kernel's path first), two modules with their strings, a memory map of an
/// available and a reserved range, and the loader name.
fn multiboot1() -> Capture {
    let mut b = vec![0u8; 0x1000];
    let flags = (1 << 0) | (1 << 2) | (1 << 3) | (1 << 6) | (1 << 9);
    put32(&mut b, 0, flags);
    put32(&mut b, 4, 639);
    put32(&mut b, 8, 129_920);
    put32(&mut b, 16, BASE + 0x100);
    put_str(
        &mut b,
        0x100,
        "target/i686-testbed/release/kernel mode=test prog=utest",
    );
    put32(&mut b, 20, 2);
    put32(&mut b, 24, BASE + 0x200);
    for (i, (start, end, s_off, name)) in [
        (
            0x0011_e000u32,
            0x0012_4000u32,
            0x300usize,
            "target/i686-testbed/release/bench bench",
        ),
        (0x0012_4000, 0x0012_9000, 0x340, "/x/utest utest"),
    ]
    .into_iter()
    .enumerate()
    {
        let e = 0x200 + i * 16;
        put32(&mut b, e, start);
        put32(&mut b, e + 4, end);
        put32(&mut b, e + 8, BASE + s_off as u32);
        put_str(&mut b, s_off, name);
    }
    // Memory map: entries of size 20 (+4 for the size field itself).
    put32(&mut b, 44, 2 * 24);
    put32(&mut b, 48, BASE + 0x400);
    for (i, (base, len, ty)) in [
        (0x10_0000u64, 0x7ee_0000u64, 1u32),
        (0xfffc_0000, 0x4_0000, 2),
    ]
    .into_iter()
    .enumerate()
    {
        let e = 0x400 + i * 24;
        put32(&mut b, e, 20);
        b[e + 4..e + 12].copy_from_slice(&base.to_le_bytes());
        b[e + 12..e + 20].copy_from_slice(&len.to_le_bytes());
        put32(&mut b, e + 20, ty);
    }
    put32(&mut b, 64, BASE + 0x500);
    put_str(&mut b, 0x500, "qemu");
    Capture {
        base: BASE,
        bytes: b,
    }
}

#[test]
fn multiboot1_from_qemu() {
    let cap = multiboot1();
    // SAFETY: Multiboot 1 reads only through `mem`.
    let bi = unsafe { BootInfo::parse(MB1_MAGIC, BASE, &&cap) }.unwrap();
    assert_eq!(bi.protocol, Protocol::Multiboot1);
    assert_eq!(bi.loader, "qemu");
    // The kernel's path is dropped; only the options remain.
    assert_eq!(bi.cmdline, "mode=test prog=utest");
    let names: Vec<_> = bi.modules().iter().map(|m| m.name).collect();
    assert_eq!(names, ["bench", "utest"]);
    assert_eq!(bi.module("utest").unwrap().start, 0x0012_4000);
    assert_eq!(bi.regions().len(), 1, "only the available range is usable");
    assert_eq!(bi.regions()[0].start, 0x10_0000);
    assert_eq!(bi.memory_kib(), 0x7ee_0000 / 1024);
    // Every piece the values point into is kept away from the frame allocator.
    let covered = |a: u32| bi.extents().iter().any(|&(s, e)| (s..e).contains(&a));
    for a in [
        BASE,
        BASE + 0x100,
        BASE + 0x200,
        BASE + 0x300,
        BASE + 0x340,
        BASE + 0x400,
        BASE + 0x500,
    ] {
        assert!(covered(a), "{a:#x} not kept");
    }
}

/// More modules than the kernel keeps: the first `MAX_MODULES` are kept,
/// the rest counted as dropped (the kernel announces them).
#[test]
fn modules_past_the_limit_are_counted_dropped() {
    let mut cap = multiboot1();
    let passed = info::MAX_MODULES as u32 + 1;
    cap.bytes.resize(0x2000, 0);
    put32(&mut cap.bytes, 20, passed);
    put32(&mut cap.bytes, 24, BASE + 0x1000);
    for i in 0..passed as usize {
        let e = 0x1000 + i * 16;
        put32(&mut cap.bytes, e, 0x0020_0000 + i as u32 * 0x1000);
        put32(&mut cap.bytes, e + 4, 0x0020_1000 + i as u32 * 0x1000);
        put32(&mut cap.bytes, e + 8, BASE + 0x1800 + i as u32 * 8);
        put_str(&mut cap.bytes, 0x1800 + i * 8, &format!("p{i}"));
    }
    // SAFETY: as above.
    let bi = unsafe { BootInfo::parse(MB1_MAGIC, BASE, &&cap) }.unwrap();
    assert_eq!(bi.modules().len(), info::MAX_MODULES);
    assert_eq!(bi.dropped_modules(), 1);
    assert_eq!(bi.modules().last().unwrap().name, "p15");
    assert!(bi.module("p16").is_none());
    assert_eq!(multiboot1_parsed().dropped_modules(), 0);

    use multiboot2::{Builder, ModuleTag};
    let mut b = Builder::new();
    for i in 0..passed {
        let name = format!("p{i}");
        b = b.add_module(ModuleTag::new(
            0x0020_0000 + i * 0x1000,
            0x0020_1000 + i * 0x1000,
            &name,
        ));
    }
    let mbi = b.build();
    let ptr = &*mbi as *const _ as *const u8;
    // SAFETY: the builder's structure starts with its u32 total size.
    let total = unsafe { ptr.cast::<u32>().read() } as usize;
    // SAFETY: `total` bytes are the structure.
    let bytes = unsafe { std::slice::from_raw_parts(ptr, total) };
    let cap = Capture {
        base: 0x0001_0000,
        bytes: bytes.to_vec(),
    };
    // SAFETY: `ptr` is a valid structure built above; `cap` shows it at 0x10000.
    let bi = unsafe { BootInfo::from_multiboot2(ptr.cast(), cap.base, &&cap) }.unwrap();
    assert_eq!(bi.modules().len(), info::MAX_MODULES);
    assert_eq!(bi.dropped_modules(), 1);
}

fn multiboot1_parsed() -> BootInfo<'static> {
    let cap: &'static Capture = Box::leak(Box::new(multiboot1()));
    // SAFETY: as above.
    unsafe { BootInfo::parse(MB1_MAGIC, BASE, &cap) }.unwrap()
}

#[test]
fn multiboot1_without_optional_parts() {
    let mut cap = multiboot1();
    put32(&mut cap.bytes, 0, 0);
    // SAFETY: as above.
    let bi = unsafe { BootInfo::parse(MB1_MAGIC, BASE, &&cap) }.unwrap();
    assert_eq!((bi.cmdline, bi.loader), ("", "unknown"));
    assert!(bi.modules().is_empty() && bi.regions().is_empty());
}

#[test]
fn multiboot1_pointer_outside_memory_is_an_error() {
    let mut cap = multiboot1();
    put32(&mut cap.bytes, 16, 0xdead_0000);
    // SAFETY: as above.
    let e = unsafe { BootInfo::parse(MB1_MAGIC, BASE, &&cap) }.unwrap_err();
    assert_eq!(e, BootInfoError::Malformed("command line"));
}

#[test]
fn bad_magic() {
    let cap = multiboot1();
    // SAFETY: rejected before anything is read.
    let e = unsafe { BootInfo::parse(0x1234, BASE, &&cap) }.unwrap_err();
    assert_eq!(e, BootInfoError::BadMagic(0x1234));
}

#[test]
fn multiboot2_from_grub() {
    use multiboot2::{
        BootLoaderNameTag, Builder, CommandLineTag, MemoryArea, MemoryAreaType, MemoryMapTag,
        ModuleTag,
    };
    let mbi = Builder::new()
        .cmdline(CommandLineTag::new("/boot/kernel mode=run prog=bench"))
        .bootloader(BootLoaderNameTag::new("GRUB 2.06-13+deb12u1"))
        .add_module(ModuleTag::new(0x0020_0000, 0x0020_6000, "bench"))
        .add_module(ModuleTag::new(0x0020_6000, 0x0020_b000, "utest"))
        .mmap(MemoryMapTag::new(&[
            MemoryArea::new(0, 0x9fc00, MemoryAreaType::Available),
            MemoryArea::new(0x10_0000, 0x7ee_0000, MemoryAreaType::Available),
            MemoryArea::new(0xfffc_0000, 0x4_0000, MemoryAreaType::Reserved),
        ]))
        .build();
    // The structure as the loader leaves it: total size in its first word.
    let ptr = &*mbi as *const _ as *const u8;
    // SAFETY: the builder's structure starts with its u32 total size.
    let total = unsafe { ptr.cast::<u32>().read() } as usize;
    // SAFETY: `total` bytes are the structure.
    let bytes = unsafe { std::slice::from_raw_parts(ptr, total) };
    // `mem` shows a copy at a low "physical" address; the parser walks the
    // tags at `ptr` and reads the strings through `mem` at the same offsets.
    let cap = Capture {
        base: 0x0001_0000,
        bytes: bytes.to_vec(),
    };
    assert_eq!(ptr as usize % 8, 0, "multiboot2 structures are 8-aligned");
    // SAFETY: `ptr` is a valid structure built above; `cap` shows it at 0x10000.
    let bi = unsafe { BootInfo::from_multiboot2(ptr.cast(), cap.base, &&cap) }.unwrap();
    assert_eq!(bi.protocol, Protocol::Multiboot2);
    assert_eq!(bi.loader, "GRUB 2.06-13+deb12u1");
    assert_eq!(bi.cmdline, "mode=run prog=bench");
    let names: Vec<_> = bi.modules().iter().map(|m| (m.name, m.start)).collect();
    assert_eq!(names, [("bench", 0x0020_0000), ("utest", 0x0020_6000)]);
    assert_eq!(bi.regions().len(), 2);
    assert_eq!(bi.info_end - bi.info_start, bytes.len() as u32);
    let _ = MB2_MAGIC;
}
