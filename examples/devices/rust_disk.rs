//! A block device from Rust: writes four sectors, syncs, reads them back,
//! and checks what the kernel refuses (a second holder, sectors past the
//! end, a part of a sector).
use warden_guest::{Device, Error, SECTOR};

fn main() -> Result<(), Error> {
    let name = std::env::args().nth(1).unwrap_or_else(|| "disk".into());
    let disk = Device::open(&name)?;
    let sectors = disk.sectors()?;
    let mut data = vec![0u8; 4 * SECTOR];
    for (i, sector) in data.chunks_mut(SECTOR).enumerate() {
        let line = format!("rust sector {}\n", 2 + i);
        sector[..line.len()].copy_from_slice(line.as_bytes());
    }
    assert_eq!(disk.write(2, &data)?, data.len());
    disk.sync()?;
    let mut back = vec![0u8; 4 * SECTOR];
    assert_eq!(disk.read(2, &mut back)?, back.len());
    assert!(back == data, "read back differs");
    assert_eq!(Device::open(&name).err(), Some(Error::BUSY));
    let mut two = vec![0u8; 2 * SECTOR];
    assert_eq!(disk.read(sectors - 1, &mut two).err(), Some(Error::RANGE));
    assert_eq!(disk.read(0, &mut back[..100]).err(), Some(Error::INVALID));
    println!("rust: device checked, {} sectors", sectors);
    Ok(())
}
