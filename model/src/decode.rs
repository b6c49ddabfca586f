//! Instruction classes, decoded from an instruction's bytes once, when QEMU
//! translates it (32-bit protected mode; Intel SDM Vol. 2, Appendix A's
//! opcode maps). Only the classes the cost model prices differently are
//! told apart; everything else is [`Class::Plain`].

use abi::model::decode_marker;

/// What the cost model charges an instruction as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    Plain,
    /// `int n`, `int3`, `into`, `int1`: software interrupt delivery.
    IntN,
    Iret,
    Sysenter,
    Sysexit,
    Syscall,
    Sysret,
    /// A far call (`lcall`): through a call gate in this kernel.
    LcallGate,
    /// A far return (`lret`).
    LretFar,
    /// `mov %reg, %cr3`.
    MovCr3,
    /// `mov %reg, %cr0` or `%cr4`: paging controls (flush the TLB, see
    /// `machine`), priced as a plain instruction.
    MovCrPaging,
    Invlpg,
    Wrmsr,
    Rdmsr,
    Cpuid,
    Rdtsc,
    Lfence,
    Popf,
    /// A load of a segment register (mov to Sreg, pop Sreg, lds/les/lss/lfs/lgs).
    SregLoad,
    /// A locked read-modify-write (`lock` prefix, or `xchg` with memory).
    Locked,
    /// `hlt`: the CPU idles until an interrupt (ends its turn in the
    /// multi-CPU ordering), priced as a plain instruction.
    Hlt,
    /// A model-plugin marker (`abi::model`): never charged.
    Marker,
}

/// Every class, in the order of [`Class::index`].
pub const CLASSES: [Class; 22] = [
    Class::Plain,
    Class::IntN,
    Class::Iret,
    Class::Sysenter,
    Class::Sysexit,
    Class::Syscall,
    Class::Sysret,
    Class::LcallGate,
    Class::LretFar,
    Class::MovCr3,
    Class::MovCrPaging,
    Class::Invlpg,
    Class::Wrmsr,
    Class::Rdmsr,
    Class::Cpuid,
    Class::Rdtsc,
    Class::Lfence,
    Class::Popf,
    Class::SregLoad,
    Class::Locked,
    Class::Hlt,
    Class::Marker,
];

/// One decoded instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decoded {
    pub class: Class,
    /// The vector of a software interrupt (`IntN`), else 0.
    pub vector: u8,
    /// The marker id (`Marker`), else 0.
    pub marker: u16,
}

const fn plain(class: Class) -> Decoded {
    Decoded {
        class,
        vector: 0,
        marker: 0,
    }
}

/// Legacy prefixes (SDM Vol. 2A §2.1.1).
const PREFIX_LOCK: u8 = 0xf0;
const PREFIXES: [u8; 11] = [
    PREFIX_LOCK,
    0xf2,
    0xf3,
    0x2e,
    0x36,
    0x3e,
    0x26,
    0x64,
    0x65,
    0x66,
    0x67,
];
/// The two-byte opcode escape.
const ESCAPE: u8 = 0x0f;

/// ModRM fields.
fn modrm(b: u8) -> (u8, u8, u8) {
    (b >> 6, (b >> 3) & 7, b & 7)
}
const MOD_REGISTER: u8 = 3;

/// The class of the instruction in `bytes` (exactly one instruction, as
/// QEMU reports it).
pub fn classify(bytes: &[u8]) -> Decoded {
    if let Some(id) = decode_marker(bytes) {
        return Decoded {
            class: Class::Marker,
            vector: 0,
            marker: id,
        };
    }
    let mut i = 0;
    let mut lock = false;
    while i < bytes.len() && PREFIXES.contains(&bytes[i]) {
        lock |= bytes[i] == PREFIX_LOCK;
        i += 1;
    }
    let op = bytes.get(i).copied().unwrap_or(0);
    let next = bytes.get(i + 1).copied();
    let rm_of = |at: usize| bytes.get(at).map(|&b| modrm(b));
    if lock {
        return plain(Class::Locked);
    }
    let int = |vector: u8| Decoded {
        class: Class::IntN,
        vector,
        marker: 0,
    };
    match op {
        0xcd => int(next.unwrap_or(0)),
        0xcc => int(3),
        0xce => int(4),
        0xf1 => int(1),
        0xcf => plain(Class::Iret),
        0x9a => plain(Class::LcallGate),
        0xca | 0xcb => plain(Class::LretFar),
        0x9d => plain(Class::Popf),
        0xf4 => plain(Class::Hlt),
        // mov Sreg, r/m; pop es/ss/ds; les; lds.
        0x8e | 0x07 | 0x17 | 0x1f | 0xc4 | 0xc5 => plain(Class::SregLoad),
        // xchg r/m, r with a memory operand is locked implicitly (SDM XCHG).
        0x86 | 0x87 => match rm_of(i + 1) {
            Some((m, _, _)) if m != MOD_REGISTER => plain(Class::Locked),
            _ => plain(Class::Plain),
        },
        // Group 5: /3 is lcall m16:32.
        0xff => match rm_of(i + 1) {
            Some((m, 3, _)) if m != MOD_REGISTER => plain(Class::LcallGate),
            _ => plain(Class::Plain),
        },
        ESCAPE => two_byte(bytes, i + 1),
        _ => plain(Class::Plain),
    }
}

fn two_byte(bytes: &[u8], at: usize) -> Decoded {
    let op = bytes.get(at).copied().unwrap_or(0);
    let rm = bytes.get(at + 1).map(|&b| modrm(b));
    match op {
        0x34 => plain(Class::Sysenter),
        0x35 => plain(Class::Sysexit),
        0x05 => plain(Class::Syscall),
        0x07 => plain(Class::Sysret),
        0x30 => plain(Class::Wrmsr),
        0x32 => plain(Class::Rdmsr),
        0x31 => plain(Class::Rdtsc),
        0xa2 => plain(Class::Cpuid),
        // mov %reg, %crN (0F 22 /r): reg names the control register.
        0x22 => match rm {
            Some((_, 3, _)) => plain(Class::MovCr3),
            Some((_, 0 | 4, _)) => plain(Class::MovCrPaging),
            _ => plain(Class::Plain),
        },
        // Group 7: /7 with a memory operand is invlpg.
        0x01 => match rm {
            Some((m, 7, _)) if m != MOD_REGISTER => plain(Class::Invlpg),
            _ => plain(Class::Plain),
        },
        // Group 15: /5 with mod=11 is lfence.
        0xae => match rm {
            Some((MOD_REGISTER, 5, _)) => plain(Class::Lfence),
            _ => plain(Class::Plain),
        },
        // pop fs/gs; lss/lfs/lgs.
        0xa1 | 0xa9 | 0xb2 | 0xb4 | 0xb5 => plain(Class::SregLoad),
        _ => plain(Class::Plain),
    }
}

impl Class {
    pub fn index(self) -> usize {
        CLASSES.iter().position(|&c| c == self).unwrap_or(0)
    }

    /// An instruction of this class does nothing in the model but cost
    /// its cycles when it is on the page of the instruction before it: it
    /// is no marker, flush, software interrupt or `hlt` (the machine's
    /// `execute` and the multi-CPU order do something more for those).
    pub fn only_costs(self) -> bool {
        !matches!(
            self,
            Class::Marker
                | Class::MovCr3
                | Class::MovCrPaging
                | Class::Invlpg
                | Class::IntN
                | Class::Hlt
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use abi::model::{marker_disp, SNAP_USER};

    fn class(b: &[u8]) -> Class {
        classify(b).class
    }

    #[test]
    fn entry_instructions() {
        assert_eq!(
            classify(&[0xcd, 0x80]),
            Decoded {
                class: Class::IntN,
                vector: 0x80,
                marker: 0
            }
        );
        assert_eq!(classify(&[0xcc]).vector, 3);
        assert_eq!(class(&[0xcf]), Class::Iret);
        assert_eq!(class(&[0x0f, 0x34]), Class::Sysenter);
        assert_eq!(class(&[0x0f, 0x35]), Class::Sysexit);
        assert_eq!(class(&[0x0f, 0x05]), Class::Syscall);
        assert_eq!(class(&[0x0f, 0x07]), Class::Sysret);
        assert_eq!(class(&[0x9a, 0, 0, 0, 0, 0x3b, 0]), Class::LcallGate);
        assert_eq!(class(&[0xff, 0x1d, 0, 0, 0, 0]), Class::LcallGate);
        assert_eq!(class(&[0xff, 0xd0]), Class::Plain); // call *%eax
        assert_eq!(class(&[0xcb]), Class::LretFar);
        assert_eq!(class(&[0xca, 4, 0]), Class::LretFar);
    }

    #[test]
    fn system_instructions() {
        assert_eq!(class(&[0x0f, 0x22, 0xd8]), Class::MovCr3); // mov %eax,%cr3
        assert_eq!(class(&[0x0f, 0x22, 0xc0]), Class::MovCrPaging); // %cr0
        assert_eq!(class(&[0x0f, 0x22, 0xe0]), Class::MovCrPaging); // %cr4
        assert_eq!(class(&[0x0f, 0x20, 0xd8]), Class::Plain); // mov %cr3,%eax
        assert_eq!(class(&[0x0f, 0x01, 0x38]), Class::Invlpg); // invlpg (%eax)
        assert_eq!(class(&[0x0f, 0x01, 0xf8]), Class::Plain); // mod=11: not invlpg
        assert_eq!(class(&[0x0f, 0x01, 0x18]), Class::Plain); // lidt
        assert_eq!(class(&[0x0f, 0x30]), Class::Wrmsr);
        assert_eq!(class(&[0x0f, 0x32]), Class::Rdmsr);
        assert_eq!(class(&[0x0f, 0xa2]), Class::Cpuid);
        assert_eq!(class(&[0x0f, 0x31]), Class::Rdtsc);
        assert_eq!(class(&[0x0f, 0xae, 0xe8]), Class::Lfence);
        assert_eq!(class(&[0x0f, 0xae, 0xf0]), Class::Plain); // mfence
        assert_eq!(class(&[0x9d]), Class::Popf);
        assert_eq!(class(&[0xf4]), Class::Hlt);
        assert_eq!(class(&[0x8e, 0xd8]), Class::SregLoad); // mov %eax,%ds
        assert_eq!(class(&[0x1f]), Class::SregLoad); // pop %ds
        assert_eq!(class(&[0x0f, 0xa9]), Class::SregLoad); // pop %gs
    }

    #[test]
    fn locked_and_prefixes() {
        assert_eq!(class(&[0xf0, 0x0f, 0xb1, 0x11]), Class::Locked); // lock cmpxchg
        assert_eq!(class(&[0x87, 0x03]), Class::Locked); // xchg %eax,(%ebx)
        assert_eq!(class(&[0x87, 0xc3]), Class::Plain); // xchg %eax,%ebx
        assert_eq!(class(&[0x66, 0x8e, 0xd8]), Class::SregLoad);
        assert_eq!(class(&[0x90]), Class::Plain);
        assert_eq!(class(&[]), Class::Plain);
    }

    #[test]
    fn markers_and_padding() {
        let d = marker_disp(SNAP_USER).to_le_bytes();
        let m = classify(&[0x0f, 0x1f, 0x80, d[0], d[1], d[2], d[3]]);
        assert_eq!((m.class, m.marker), (Class::Marker, SNAP_USER));
        assert_eq!(class(&[0x0f, 0x1f, 0x80, 0, 0, 0, 0]), Class::Plain);
    }

    #[test]
    fn classes_index_in_order() {
        for (i, c) in CLASSES.iter().enumerate() {
            assert_eq!(c.index(), i);
        }
    }
}
