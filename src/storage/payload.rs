//! The bytes of an object to put: one buffer, or several written one
//! after another without being joined first (a shard's index and its
//! encoded inner chunks, say).

use bytes::Bytes;

/// An object's bytes, in parts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Payload {
    parts: Vec<Bytes>,
}

impl Payload {
    /// The object's length.
    pub fn len(&self) -> usize {
        self.parts.iter().map(Bytes::len).sum()
    }

    /// Whether the object is empty.
    pub fn is_empty(&self) -> bool {
        self.parts.iter().all(Bytes::is_empty)
    }

    /// The parts, in order.
    pub fn parts(&self) -> &[Bytes] {
        &self.parts
    }

    /// The parts joined (no copy for one part).
    pub fn to_bytes(&self) -> Bytes {
        match self.parts.as_slice() {
            [] => Bytes::new(),
            [one] => one.clone(),
            parts => Bytes::from(parts.concat()),
        }
    }
}

impl From<Bytes> for Payload {
    fn from(bytes: Bytes) -> Self {
        Self { parts: vec![bytes] }
    }
}

impl From<Vec<u8>> for Payload {
    fn from(bytes: Vec<u8>) -> Self {
        Bytes::from(bytes).into()
    }
}

impl From<Vec<Bytes>> for Payload {
    fn from(parts: Vec<Bytes>) -> Self {
        Self { parts }
    }
}

impl From<Payload> for object_store::PutPayload {
    fn from(payload: Payload) -> Self {
        payload.parts.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_join_in_order() {
        let payload = Payload::from(vec![Bytes::from_static(b"ab"), Bytes::new(), Bytes::from_static(b"c")]);
        assert_eq!(payload.len(), 3);
        assert!(!payload.is_empty());
        assert_eq!(payload.to_bytes(), Bytes::from_static(b"abc"));
        let put = object_store::PutPayload::from(payload);
        assert_eq!(put.content_length(), 3);
        assert!(Payload::default().is_empty());
    }
}
