//! Bounded capture of a command's output: the first half of the budget keeps the head, a ring
//! buffer keeps the tail, and everything in between is counted and dropped.
//!
//! Memory is fixed by the limit, whatever the command prints, and pushing never blocks or
//! fails, so the reader can always keep the pipe empty.
//!
//! ```
//! use cordon::exec::capture::CappedBuffer;
//!
//! let mut buf = CappedBuffer::new(8);
//! buf.push(b"0123");
//! buf.push(b"456789abcdef");
//! let out = buf.finish();
//! assert_eq!(out.total, 16);
//! assert_eq!(out.dropped, 8);
//! assert_eq!(out.bytes, b"0123\n[... cordon: 8 bytes elided ...]\ncdef");
//! ```

use serde::{Deserialize, Serialize};

/// Output kept from one stream (or from both, interleaved), with what was dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Captured {
    /// The head, then (when anything was dropped) an elision marker, then the tail.
    #[serde(with = "lossy_bytes")]
    pub bytes: Vec<u8>,
    /// Bytes the command wrote in all.
    pub total: u64,
    /// Bytes dropped between head and tail (not counting the marker).
    pub dropped: u64,
}

impl Captured {
    /// The kept bytes as text, with invalid UTF-8 replaced.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

/// The marker put between head and tail when bytes were dropped.
pub fn elision_marker(dropped: u64) -> String {
    format!("\n[... cordon: {dropped} bytes elided ...]\n")
}

/// A capture buffer holding at most `limit` bytes of the stream: its first `limit / 2` bytes
/// and its last `limit - limit / 2`.
#[derive(Debug)]
pub struct CappedBuffer {
    head: Vec<u8>,
    head_cap: usize,
    tail: Ring,
    total: u64,
}

impl CappedBuffer {
    /// A buffer that keeps at most `limit` bytes. Memory is allocated as output arrives.
    pub fn new(limit: usize) -> CappedBuffer {
        let head_cap = limit / 2;
        CappedBuffer {
            head: Vec::new(),
            head_cap,
            tail: Ring::new(limit - head_cap),
            total: 0,
        }
    }

    /// Appends bytes, dropping from the middle once over the limit.
    pub fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let to_head = (self.head_cap - self.head.len()).min(bytes.len());
        self.head.extend_from_slice(&bytes[..to_head]);
        self.tail.push(&bytes[to_head..]);
    }

    /// Bytes seen so far.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// What [`CappedBuffer::finish`] would return now, leaving the buffer as it is.
    pub fn snapshot(&self) -> Captured {
        let kept = (self.head.len() + self.tail.len()) as u64;
        let dropped = self.total - kept;
        let mut bytes = self.head.clone();
        if dropped > 0 {
            bytes.extend_from_slice(elision_marker(dropped).as_bytes());
        }
        self.tail.append_to(&mut bytes);
        Captured {
            bytes,
            total: self.total,
            dropped,
        }
    }

    /// The head, marker and tail.
    pub fn finish(self) -> Captured {
        let kept = (self.head.len() + self.tail.len()) as u64;
        let dropped = self.total - kept;
        let mut bytes = self.head;
        if dropped > 0 {
            bytes.extend_from_slice(elision_marker(dropped).as_bytes());
        }
        self.tail.append_to(&mut bytes);
        Captured {
            bytes,
            total: self.total,
            dropped,
        }
    }
}

/// Keeps the last `cap` bytes pushed. Grows up to `cap`, then overwrites in place.
#[derive(Debug)]
struct Ring {
    buf: Vec<u8>,
    cap: usize,
    /// Where the next byte goes once `buf` is full; also where the oldest byte is.
    pos: usize,
}

impl Ring {
    fn new(cap: usize) -> Ring {
        Ring {
            buf: Vec::new(),
            cap,
            pos: 0,
        }
    }

    fn len(&self) -> usize {
        self.buf.len()
    }

    fn push(&mut self, mut data: &[u8]) {
        if self.cap == 0 {
            return;
        }
        if self.buf.len() < self.cap {
            let n = (self.cap - self.buf.len()).min(data.len());
            self.buf.extend_from_slice(&data[..n]);
            data = &data[n..];
            if data.is_empty() {
                return;
            }
        }
        // Full from here on: overwrite the oldest bytes.
        if data.len() >= self.cap {
            self.buf.copy_from_slice(&data[data.len() - self.cap..]);
            self.pos = 0;
            return;
        }
        let first = (self.cap - self.pos).min(data.len());
        self.buf[self.pos..self.pos + first].copy_from_slice(&data[..first]);
        let rest = &data[first..];
        self.buf[..rest.len()].copy_from_slice(rest);
        self.pos = (self.pos + data.len()) % self.cap;
    }

    fn append_to(&self, out: &mut Vec<u8>) {
        // Before the ring first fills, `pos` is 0 and the order is simply `buf`.
        out.extend_from_slice(&self.buf[self.pos..]);
        out.extend_from_slice(&self.buf[..self.pos]);
    }
}

/// Serialises bytes as (lossy) UTF-8 text, which is what people and agents read.
pub(crate) mod lossy_bytes {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&String::from_utf8_lossy(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        Ok(String::deserialize(d)?.into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(limit: usize, data: &[u8]) -> Vec<u8> {
        if data.len() <= limit {
            return data.to_vec();
        }
        let head = limit / 2;
        let tail = limit - head;
        let mut out = data[..head].to_vec();
        out.extend_from_slice(elision_marker((data.len() - limit) as u64).as_bytes());
        out.extend_from_slice(&data[data.len() - tail..]);
        out
    }

    #[test]
    fn matches_naive_for_every_split() {
        let data: Vec<u8> = (0..200u32).map(|i| (i * 7 % 251) as u8).collect();
        for limit in [0, 1, 2, 7, 16, 199, 200, 300] {
            for chunk in [1, 3, 10, 64, 500] {
                let mut buf = CappedBuffer::new(limit);
                for piece in data.chunks(chunk) {
                    buf.push(piece);
                }
                let out = buf.finish();
                assert_eq!(
                    out.bytes,
                    naive(limit, &data),
                    "limit {limit} chunk {chunk}"
                );
                assert_eq!(out.total, 200);
                assert_eq!(out.dropped, 200u64.saturating_sub(limit as u64));
            }
        }
    }

    #[test]
    fn nothing_dropped_means_no_marker() {
        let mut buf = CappedBuffer::new(10);
        buf.push(b"hello");
        assert_eq!(buf.finish().bytes, b"hello");
    }
}
