//! Loading a user program: a static i386 ELF executable (xmas-elf parses it).
//!
//! Each PT_LOAD segment is mapped user-accessible, writable only if its
//! flags say so, and must lie entirely in `[USER_BASE, USER_TOP)`.

use abi::layout::{PAGE_SIZE, USER_BASE, USER_TOP};
use xmas_elf::program::Type;
use xmas_elf::ElfFile;

use crate::vm::Space;

/// Why a program could not be loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadError {
    Elf(&'static str),
    OutOfMemory,
}

/// Maps the program's segments into `space`; returns its entry point.
/// The pages that hold file bytes are mapped now; the rest of each segment
/// (`.bss`) is demand-zero.
pub fn load(space: &mut Space, image: &[u8]) -> Result<u32, LoadError> {
    let elf = ElfFile::new(image).map_err(LoadError::Elf)?;
    if elf.header.pt1.class() != xmas_elf::header::Class::ThirtyTwo
        || elf.header.pt2.machine().as_machine() != xmas_elf::header::Machine::X86
    {
        return Err(LoadError::Elf("not an i386 ELF"));
    }
    for ph in elf.program_iter() {
        if ph.get_type() != Ok(Type::Load) || ph.mem_size() == 0 {
            continue;
        }
        let (va, memsz) = (ph.virtual_addr(), ph.mem_size());
        let (off, filesz) = (ph.offset(), ph.file_size());
        let end = va
            .checked_add(memsz)
            .ok_or(LoadError::Elf("segment wraps"))?;
        if va < USER_BASE as u64 || end > USER_TOP as u64 || filesz > memsz {
            return Err(LoadError::Elf("segment outside user space"));
        }
        let file = image
            .get(off as usize..(off + filesz) as usize)
            .ok_or(LoadError::Elf("segment outside the file"))?;
        let writable = ph.flags().is_write();
        space.add_image(va as u32, end as u32, (va + filesz) as u32);
        let mut page = (va as u32) & !(PAGE_SIZE - 1);
        while (page as u64) < va + filesz {
            space
                .map_zeroed(page, writable)
                .map_err(|_| LoadError::OutOfMemory)?;
            page += PAGE_SIZE;
        }
        // The file's bytes, through the pages themselves (so read-only
        // pages need no write access); the rest stays zero.
        space.load(va as u32, file);
    }
    let entry = elf.header.pt2.entry_point() as u32;
    if !(USER_BASE..USER_TOP).contains(&entry) {
        return Err(LoadError::Elf("entry point outside user space"));
    }
    Ok(entry)
}
