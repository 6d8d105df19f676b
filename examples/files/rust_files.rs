//! Files in Rust, with `std::fs` only: writes /data/rust.txt, reads it
//! back, makes and renames a directory, lists /data. Knows nothing of
//! Warden.
use std::fs;

fn main() -> std::io::Result<()> {
    let text = "written by rust\n";
    fs::write("/data/rust.txt", text)?;
    assert_eq!(fs::read_to_string("/data/rust.txt")?, text);
    fs::create_dir_all("/data/rust-dir/inner")?;
    fs::rename("/data/rust-dir/inner", "/data/rust-dir/moved")?;
    assert!(fs::metadata("/data/rust-dir/moved")?.is_dir());
    let names = fs::read_dir("/data")?.count();
    println!("rust: wrote and read back /data/rust.txt; /data lists {} names", names);
    Ok(())
}
