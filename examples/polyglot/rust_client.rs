//! An echo client in Rust: sends args[1] greetings, checks each echo, says bye.
use warden_guest::Portal;

fn main() -> Result<(), warden_guest::Error> {
    let n: u32 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(3);
    let echo = Portal::lookup("echo", -1)?;
    for i in 0..n {
        let msg = format!("rust says hello #{}", i);
        assert_eq!(echo.call(msg.as_bytes())?, msg.as_bytes(), "bad echo");
    }
    echo.call(b"bye")?;
    println!("rust: {} echoes checked", n);
    Ok(())
}
