//! Placeholder: the ministat implementation lands here.
#[derive(clap::Args)]
pub struct Args {}
pub fn main(_a: Args) -> i32 {
    0
}
