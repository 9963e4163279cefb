//! The container around the tar: a zstd frame when compression pays, the
//! plain tar otherwise.
//!
//! Packing compresses the archive (zstd level 19) and keeps the result only
//! when it saves at least a tenth: components compress to about a third, a
//! bundle of already-compressed data does not. Reading tells the two apart
//! by the zstd frame's magic number and decompresses at most
//! [`Limits::archive_bytes`]: a frame that would grow past it is refused
//! before the rest is decompressed, so a small file cannot expand into an
//! unbounded one. What the signature covers is the entries, not the
//! container, so compressing never changes a signature.

use crate::error::BundleError;
use crate::layout::Limits;
use std::borrow::Cow;
use std::io::Read as _;

/// The first four bytes of a zstd frame (RFC 8878, little-endian 0xFD2FB528).
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// The compression level of packed bundles.
const LEVEL: i32 = 19;

/// Largest zstd window accepted when reading (128 MiB, zstd's own default
/// limit): bounds the decoder's memory whatever the frame declares.
const WINDOW_LOG_MAX: u32 = 27;

/// Whether a bundle file is compressed, and how large its archive is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Container {
    /// A plain tar.
    Tar,
    /// A zstd frame holding the tar.
    Zstd {
        /// The tar's size once decompressed.
        archive_bytes: u64,
    },
}

/// The bundle file for `archive`: compressed when that saves at least a
/// tenth of its size, else the archive itself. Deterministic: the same
/// archive always gives the same bytes.
///
/// # Errors
///
/// The compressor fails (not expected in memory).
pub(crate) fn encode(archive: Vec<u8>) -> Result<Vec<u8>, BundleError> {
    let compressed = compress(&archive)?;
    let pays = (compressed.len() as u64).saturating_mul(10) <= (archive.len() as u64) * 9;
    Ok(if pays { compressed } else { archive })
}

/// `bytes` as one zstd frame, at the level bundles are packed with,
/// whether or not that pays (for tests and tools that build frames).
///
/// # Errors
///
/// The compressor fails (not expected in memory).
pub fn compress(bytes: &[u8]) -> Result<Vec<u8>, BundleError> {
    zstd::stream::encode_all(bytes, LEVEL)
        .map_err(|e| BundleError::Pack(format!("compressing the bundle: {e}")))
}

/// The archive inside a bundle file.
///
/// # Errors
///
/// A corrupt or truncated zstd frame, data after it, or an archive larger
/// than `limits` admits.
pub(crate) fn decode<'b>(
    bytes: &'b [u8],
    limits: &Limits,
) -> Result<(Cow<'b, [u8]>, Container), BundleError> {
    if !bytes.starts_with(&ZSTD_MAGIC) {
        return Ok((Cow::Borrowed(bytes), Container::Tar));
    }
    let corrupt = |e: std::io::Error| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            BundleError::Truncated("the zstd frame ends early".into())
        } else {
            BundleError::NotTar(format!("corrupt zstd frame: {e}"))
        }
    };
    let mut decoder = zstd::stream::read::Decoder::with_buffer(bytes)
        .map_err(corrupt)?
        .single_frame();
    decoder.window_log_max(WINDOW_LOG_MAX).map_err(corrupt)?;
    let limit = limits.archive_bytes();
    let mut archive = Vec::new();
    (&mut decoder)
        .take(limit.saturating_add(1))
        .read_to_end(&mut archive)
        .map_err(corrupt)?;
    if archive.len() as u64 > limit {
        return Err(BundleError::TooMuch(format!(
            "it decompresses to more than {limit} bytes"
        )));
    }
    let rest = decoder.finish();
    if !rest.is_empty() {
        return Err(BundleError::NotTar(format!(
            "{} bytes after the zstd frame",
            rest.len()
        )));
    }
    let archive_bytes = archive.len() as u64;
    Ok((Cow::Owned(archive), Container::Zstd { archive_bytes }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compresses_only_when_it_pays() {
        let text = b"a capability's component compresses well ".repeat(200);
        let packed = encode(text.clone()).expect("encode");
        assert!(packed.starts_with(&ZSTD_MAGIC) && packed.len() < text.len() / 10);
        let (back, container) = decode(&packed, &Limits::default()).expect("decode");
        assert_eq!(back.as_ref(), text.as_slice());
        assert_eq!(
            container,
            Container::Zstd {
                archive_bytes: text.len() as u64
            }
        );
        // Bytes that do not compress stay as they are.
        let mut noise = Vec::new();
        let mut x: u32 = 0x9e37_79b9;
        for _ in 0..4096 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            noise.push(x.to_le_bytes()[0]);
        }
        assert_eq!(encode(noise.clone()).expect("encode"), noise);
        let (back, container) = decode(&noise, &Limits::default()).expect("decode");
        assert_eq!(
            (back.as_ref(), container),
            (noise.as_slice(), Container::Tar)
        );
    }

    #[test]
    fn bombs_corruption_and_trailing_data_are_refused() {
        let zeros = encode(vec![0; 1 << 20]).expect("encode");
        assert!(zeros.len() < 1024);
        let small = Limits {
            total_bytes: 1000,
            entries: 1,
            ..Limits::default()
        };
        let e = decode(&zeros, &small).expect_err("bomb");
        assert_eq!(
            e.to_string(),
            "bundle too large: it decompresses to more than 3048 bytes"
        );
        let e = decode(&zeros[..zeros.len() - 3], &Limits::default()).expect_err("truncated");
        assert_eq!(e.to_string(), "truncated bundle: the zstd frame ends early");
        let mut garbled = zeros.clone();
        garbled.truncate(8);
        garbled.extend_from_slice(&[0xff; 64]);
        let e = decode(&garbled, &Limits::default()).expect_err("garbled");
        assert!(
            e.to_string()
                .starts_with("not a bundle: corrupt zstd frame: "),
            "{e}"
        );
        let mut trailing = zeros;
        trailing.extend_from_slice(b"extra");
        let e = decode(&trailing, &Limits::default()).expect_err("trailing");
        assert_eq!(e.to_string(), "not a bundle: 5 bytes after the zstd frame");
    }
}
