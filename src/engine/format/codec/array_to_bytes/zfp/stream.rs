//! zfp's bit stream, read side.
//!
//! A zfp stream is a sequence of 64-bit little-endian words; bits are read
//! from each word's least significant bit up, and a multi-bit value is read
//! least significant bit first. Reading past the end yields zero bits and
//! marks the reader [`BitReader::overran`], so the block decoder needs no
//! check per bit: its caller checks once, and reports the stream as corrupt.

/// Reads bits from a zfp stream.
pub(super) struct BitReader<'a> {
    data: &'a [u8],
    /// Byte offset of the next word to load.
    next: usize,
    /// Bits not yet read from the current word, in its low `count` bits.
    buffer: u64,
    count: u32,
    overran: bool,
}

impl<'a> BitReader<'a> {
    pub(super) fn new(data: &'a [u8]) -> Self {
        Self {
            data,
            next: 0,
            buffer: 0,
            count: 0,
            overran: false,
        }
    }

    /// Whether a read went past the end of the data.
    pub(super) fn overran(&self) -> bool {
        self.overran
    }

    /// The next word; a last partial word is padded with zeros.
    fn load(&mut self) -> u64 {
        let Some(rest) = self.data.get(self.next..).filter(|r| !r.is_empty()) else {
            self.overran = true;
            return 0;
        };
        let mut word = [0u8; 8];
        let n = rest.len().min(8);
        word[..n].copy_from_slice(&rest[..n]);
        self.next += 8;
        u64::from_le_bytes(word)
    }

    /// Load the next word when the current one is used up.
    #[inline]
    fn refill(&mut self) {
        if self.count == 0 {
            self.buffer = self.load();
            self.count = 64;
        }
    }

    /// One bit.
    #[inline]
    pub(super) fn bit(&mut self) -> bool {
        self.refill();
        let bit = self.buffer & 1 == 1;
        self.buffer >>= 1;
        self.count -= 1;
        bit
    }

    /// `n` bits (at most 64), the first read in the lowest bit.
    #[inline]
    pub(super) fn bits(&mut self, n: u32) -> u64 {
        debug_assert!(n <= 64);
        if n == 0 {
            return 0;
        }
        if n <= self.count {
            let value = self.buffer & mask(n);
            self.buffer = self.buffer.checked_shr(n).unwrap_or(0);
            self.count -= n;
            return value;
        }
        // The low `count` bits come from the buffer, the rest from the next word.
        let low = self.buffer;
        let have = self.count;
        let word = self.load();
        let value = (low | word.checked_shl(have).unwrap_or(0)) & mask(n);
        let used = n - have;
        self.buffer = word.checked_shr(used).unwrap_or(0);
        self.count = 64 - used;
        value
    }

    /// Read up to `limit` bits, stopping after the first one bit: how many
    /// zeros came before it, and whether it came.
    #[inline]
    pub(super) fn zeros_then_one(&mut self, limit: u32) -> (u32, bool) {
        let mut zeros = 0;
        while zeros < limit {
            self.refill();
            // Bits above `count` are zero, so a one below it is the next one.
            let run = self.buffer.trailing_zeros();
            let room = self.count.min(limit - zeros);
            if run < room {
                self.buffer = self.buffer.checked_shr(run + 1).unwrap_or(0);
                self.count -= run + 1;
                return (zeros + run, true);
            }
            self.buffer = self.buffer.checked_shr(room).unwrap_or(0);
            self.count -= room;
            zeros += room;
        }
        (zeros, false)
    }

    /// Skip `n` bits.
    pub(super) fn skip(&mut self, mut n: u64) {
        if n <= u64::from(self.count) {
            self.bits(n as u32);
            return;
        }
        n -= u64::from(self.count);
        self.count = 0;
        self.buffer = 0;
        let words = n / 64;
        let target = (words as usize).saturating_mul(8).saturating_add(self.next);
        if target > self.data.len() {
            self.overran = true;
            self.next = self.data.len();
            return;
        }
        self.next = target;
        self.bits((n % 64) as u32);
    }
}

/// Writes bits into a zfp stream.
#[derive(Default)]
pub(super) struct BitWriter {
    words: Vec<u64>,
    /// Bits of the word being filled, in its low `count` bits.
    buffer: u64,
    count: u32,
}

impl BitWriter {
    /// One bit; returns it.
    #[inline]
    pub(super) fn bit(&mut self, bit: bool) -> bool {
        self.buffer |= u64::from(bit) << self.count;
        self.count += 1;
        if self.count == 64 {
            self.words.push(self.buffer);
            self.buffer = 0;
            self.count = 0;
        }
        bit
    }

    /// The low `n` bits of `value` (at most 64), the lowest first.
    #[inline]
    pub(super) fn bits(&mut self, value: u64, n: u32) {
        if n == 0 {
            return;
        }
        let value = value & mask(n);
        self.buffer |= value << self.count;
        let total = self.count + n;
        if total >= 64 {
            self.words.push(self.buffer);
            // The bits that did not fit in the word just filled.
            self.buffer = value.checked_shr(64 - self.count).unwrap_or(0);
            self.count = total - 64;
        } else {
            self.count = total;
        }
    }

    /// `n` zero bits.
    pub(super) fn pad(&mut self, mut n: u64) {
        while n > 0 {
            let step = n.min(64) as u32;
            self.bits(0, step);
            n -= u64::from(step);
        }
    }

    /// The stream, padded with zeros to a whole word (`stream_flush`).
    pub(super) fn finish(mut self) -> Vec<u8> {
        if self.count > 0 {
            self.words.push(self.buffer);
        }
        self.words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }
}

/// The low `n` bits set (`n` at most 64).
fn mask(n: u32) -> u64 {
    u64::MAX.checked_shr(64 - n).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_come_lowest_first_across_words() {
        let mut data = Vec::new();
        data.extend_from_slice(&0xF0E1_D2C3_B4A5_9687u64.to_le_bytes());
        data.extend_from_slice(&0x0123_4567_89AB_CDEFu64.to_le_bytes());
        let mut r = BitReader::new(&data);
        assert!(r.bit()); // 0x87 = 1000_0111
        assert!(r.bit());
        assert!(r.bit());
        assert!(!r.bit());
        assert_eq!(r.bits(4), 0x8);
        assert_eq!(r.bits(56), 0x00F0_E1D2_C3B4_A596);
        assert_eq!(r.bits(12), 0xDEF);
        r.skip(40);
        assert_eq!(r.bits(12), 0x012);
        assert!(!r.overran());
        assert_eq!(r.bits(1), 0);
        assert!(r.overran());
    }

    #[test]
    fn what_is_written_reads_back() {
        let mut w = BitWriter::default();
        w.bit(true);
        w.bits(0xABC, 12);
        w.bits(u64::MAX, 64);
        w.pad(70);
        w.bits(0b101, 3);
        let data = w.finish();
        assert_eq!(data.len(), 24); // 150 bits in 3 words
        let mut r = BitReader::new(&data);
        assert!(r.bit());
        assert_eq!(r.bits(12), 0xABC);
        assert_eq!(r.bits(64), u64::MAX);
        r.skip(70);
        assert_eq!(r.bits(3), 0b101);
        assert_eq!(r.bits(42), 0);
        assert!(!r.overran());
    }

    #[test]
    fn runs_of_zeros_end_at_a_one_or_the_limit() {
        let mut data = Vec::new();
        data.extend_from_slice(&(1u64 << 63 | 1 << 5).to_le_bytes());
        data.extend_from_slice(&(1u64 << 10).to_le_bytes());
        let mut r = BitReader::new(&data);
        assert_eq!(r.zeros_then_one(100), (5, true));
        assert_eq!(r.zeros_then_one(10), (10, false));
        assert_eq!(r.zeros_then_one(100), (47, true)); // bit 63
        assert_eq!(r.zeros_then_one(100), (10, true)); // across the word
        assert_eq!(r.zeros_then_one(0), (0, false));
        assert_eq!(r.bits(53), 0);
        assert!(!r.overran());
        assert_eq!(r.zeros_then_one(3), (3, false));
        assert!(r.overran());
    }

    #[test]
    fn a_read_of_64_bits_straddles_words() {
        let mut data = Vec::new();
        data.extend_from_slice(&u64::MAX.to_le_bytes());
        data.extend_from_slice(&0u64.to_le_bytes());
        let mut r = BitReader::new(&data);
        assert_eq!(r.bits(3), 0b111);
        assert_eq!(r.bits(64), u64::MAX >> 3);
        assert_eq!(r.bits(64), 0);
        assert!(r.overran());
        let mut r = BitReader::new(&data);
        assert_eq!(r.bits(64), u64::MAX);
        assert_eq!(r.bits(64), 0);
        assert!(!r.overran());
        let mut r = BitReader::new(&data);
        r.skip(200);
        assert!(r.overran());
    }
}
