mod ministat;
fn main() {}
