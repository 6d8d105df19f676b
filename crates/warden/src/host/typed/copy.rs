//! What a typed call copies, measured: the flat size of a value (the
//! bytes the canonical ABI lays out, strings and lists by their
//! contents), against the caller's `max_message_bytes`.

use wasmtime::component::Val;

/// The flat size of `vals` in bytes, or `Err` with the size reached once
/// it passed `cap` (the walk stops there).
pub(super) fn size(vals: &[Val], cap: u64) -> Result<u64, u64> {
    let mut total = 0u64;
    for v in vals {
        total = total.saturating_add(one(v, cap.saturating_sub(total))?);
        if total > cap {
            return Err(total);
        }
    }
    Ok(total)
}

/// The flat size of `v`, stopping past `left`.
fn one(v: &Val, left: u64) -> Result<u64, u64> {
    let boxed = |b: &Option<Box<Val>>| b.as_deref().map_or(Ok(0), |v| one(v, left));
    let n = match v {
        Val::Bool(_) | Val::S8(_) | Val::U8(_) => 1,
        Val::S16(_) | Val::U16(_) => 2,
        Val::S32(_) | Val::U32(_) | Val::Float32(_) | Val::Char(_) => 4,
        Val::S64(_) | Val::U64(_) | Val::Float64(_) => 8,
        Val::String(s) => 8 + s.len() as u64,
        Val::List(vs) | Val::Tuple(vs) | Val::FixedLengthList(vs) => 8 + size(vs, left)?,
        Val::Record(fs) => {
            let mut t = 0u64;
            for (_, v) in fs {
                t = t.saturating_add(one(v, left.saturating_sub(t))?);
            }
            t
        }
        Val::Variant(_, b) | Val::Option(b) => 4 + boxed(b)?,
        Val::Result(Ok(b)) | Val::Result(Err(b)) => 4 + boxed(b)?,
        Val::Enum(_) => 4,
        Val::Flags(f) => 4 + 4 * (f.len() as u64 / 32),
        Val::Map(kv) => {
            let mut t = 8u64;
            for (k, v) in kv {
                t = t
                    .saturating_add(one(k, left)?)
                    .saturating_add(one(v, left)?);
            }
            t
        }
        _ => 4,
    };
    match n > left {
        true => Err(n),
        false => Ok(n),
    }
}

/// Why a call whose `what` ("arguments", "results") would copy more
/// than the caller's `cap` fails (the walk stopped at `_n`).
pub(super) fn refusal(what: &str, _n: u64, cap: u64) -> wasmtime::Error {
    wasmtime::Error::msg(format!(
        "its {what} take more than the caller's max_message_bytes ({cap} bytes)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_and_lists_count_their_contents_and_stop_past_the_cap() {
        let words = Val::List(vec![Val::String("abc".into()), Val::String("de".into())]);
        assert_eq!(
            size(&[Val::U32(1), words.clone()], 100),
            Ok(4 + 8 + 11 + 10)
        );
        assert!(size(&[words], 20).is_err());
        let big = Val::List(vec![Val::U8(0); 1000]);
        assert_eq!(size(std::slice::from_ref(&big), 10_000), Ok(1008));
        assert!(size(&[big], 999).is_err());
    }
}
