//! Comparisons of secrets whose time does not tell where they differ.

/// Whether `a` and `b` are equal, looking at every byte of the shorter
/// whatever the first difference (a length difference shows).
pub(crate) fn eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    #[test]
    fn equal_only_when_every_byte_is() {
        assert!(super::eq(b"token", b"token"));
        assert!(!super::eq(b"token", b"tokem"));
        assert!(!super::eq(b"token", b"toke"));
        assert!(super::eq(b"", b""));
    }
}
