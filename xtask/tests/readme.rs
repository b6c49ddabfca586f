//! The README stays an entry point: the book holds the rest.

/// The longest the README may be, in lines: past it, a section belongs in
/// the book (docs/), with a link from the README.
const README_MAX_LINES: usize = 250;

#[test]
fn the_readme_is_at_most_250_lines() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md");
    let text = std::fs::read_to_string(path).expect("README.md is readable");
    let lines = text.lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, more than {README_MAX_LINES}: move a section into the book and link it"
    );
}
