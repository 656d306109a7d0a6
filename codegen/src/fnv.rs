//! FNV-1a 64: a hash with a fixed algorithm, for keys that outlive the
//! process (the on-disk PTX cache). std's `DefaultHasher` may change
//! between Rust releases, which would silently orphan or mix cache files.

use std::hash::Hasher;

/// The FNV-1a 64-bit hasher (offset basis and prime from the FNV spec).
#[derive(Clone, Copy, Debug)]
pub struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv1a {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    /// Integers hash as little-endian bytes whatever the host, so the
    /// key does not depend on the machine's byte order or `usize` width.
    fn write_usize(&mut self, i: usize) {
        self.write(&(i as u64).to_le_bytes());
    }

    fn write_isize(&mut self, i: isize) {
        self.write(&(i as i64).to_le_bytes());
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::Fnv1a;
    use std::hash::Hasher;

    #[test]
    fn fnv1a_64_reference_vectors() {
        let h = |s: &[u8]| {
            let mut f = Fnv1a::default();
            f.write(s);
            f.finish()
        };
        assert_eq!(h(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(h(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(h(b"foobar"), 0x8594_4171_f739_67e8);
    }
}
