//! Typed values as bytes, for typed calls between nodes: each side
//! writes and reads by the function's type (which the binding checked
//! to be the same on both), so the bytes carry no type information.
//!
//! Little-endian throughout. `bool`, `u8`, `s8`: 1 byte; `u16`, `s16`:
//! 2; `u32`, `s32`, `f32`, `char`: 4; `u64`, `s64`, `f64`: 8. A string:
//! its length in bytes (u32), then its UTF-8. A list: its length (u32),
//! then each element. A record or tuple: its fields in order. A variant
//! or enum: the case's index (u32), then the case's payload if it has
//! one. An option or result: a byte (0 none / ok, 1 some / err), then the
//! payload if there is one. Flags: ⌈n/32⌉ u32 words, flag i as bit i%32
//! of word i/32. Resources do not cross nodes.
//!
//! Reading is bounded by the bytes: a length past what is left is
//! refused before anything is allocated, as are bad UTF-8, bad chars,
//! unknown cases and trailing bytes.

use wasmtime::component::types::Type;
use wasmtime::component::Val;

/// Appends `v`, of type `ty`, to `out`.
pub(crate) fn write(v: &Val, ty: &Type, out: &mut Vec<u8>) -> Result<(), String> {
    match (v, ty) {
        (Val::Bool(b), _) => out.push(*b as u8),
        (Val::U8(x), _) => out.push(*x),
        (Val::S8(x), _) => out.push(*x as u8),
        (Val::U16(x), _) => out.extend(x.to_le_bytes()),
        (Val::S16(x), _) => out.extend(x.to_le_bytes()),
        (Val::U32(x), _) => out.extend(x.to_le_bytes()),
        (Val::S32(x), _) => out.extend(x.to_le_bytes()),
        (Val::U64(x), _) => out.extend(x.to_le_bytes()),
        (Val::S64(x), _) => out.extend(x.to_le_bytes()),
        (Val::Float32(x), _) => out.extend(x.to_bits().to_le_bytes()),
        (Val::Float64(x), _) => out.extend(x.to_bits().to_le_bytes()),
        (Val::Char(c), _) => out.extend((*c as u32).to_le_bytes()),
        (Val::String(s), _) => {
            out.extend((s.len() as u32).to_le_bytes());
            out.extend(s.as_bytes());
        }
        (Val::List(vs), Type::List(l)) => {
            out.extend((vs.len() as u32).to_le_bytes());
            let t = l.ty();
            vs.iter().try_for_each(|v| write(v, &t, out))?;
        }
        (Val::Record(fs), Type::Record(r)) => {
            for ((_, v), f) in fs.iter().zip(r.fields()) {
                write(v, &f.ty, out)?;
            }
        }
        (Val::Tuple(vs), Type::Tuple(t)) => {
            vs.iter()
                .zip(t.types())
                .try_for_each(|(v, t)| write(v, &t, out))?;
        }
        (v, t) => write_case(v, t, out)?,
    }
    Ok(())
}

/// [`write`] for the types with cases and tags.
fn write_case(v: &Val, ty: &Type, out: &mut Vec<u8>) -> Result<(), String> {
    let payload = |b: &Option<Box<Val>>, t: Option<Type>, out: &mut Vec<u8>| match (b, t) {
        (Some(v), Some(t)) => write(v, &t, out),
        _ => Ok(()),
    };
    match (v, ty) {
        (Val::Variant(name, b), Type::Variant(t)) => {
            let (i, case) = (t.cases().enumerate())
                .find(|(_, c)| c.name == name)
                .ok_or("an unknown case")?;
            out.extend((i as u32).to_le_bytes());
            payload(b, case.ty, out)
        }
        (Val::Enum(name), Type::Enum(t)) => {
            let i = t.names().position(|n| n == name).ok_or("an unknown case")?;
            out.extend((i as u32).to_le_bytes());
            Ok(())
        }
        (Val::Option(b), Type::Option(t)) => {
            out.push(b.is_some() as u8);
            payload(b, Some(t.ty()), out)
        }
        (Val::Result(r), Type::Result(t)) => match r {
            Ok(b) => {
                out.push(0);
                payload(b, t.ok(), out)
            }
            Err(b) => {
                out.push(1);
                payload(b, t.err(), out)
            }
        },
        (Val::Flags(set), Type::Flags(t)) => {
            let names: Vec<&str> = t.names().collect();
            let mut words = vec![0u32; names.len().div_ceil(32)];
            for s in set {
                let i = names.iter().position(|n| n == s).ok_or("an unknown flag")?;
                words[i / 32] |= 1 << (i % 32);
            }
            words.iter().for_each(|w| out.extend(w.to_le_bytes()));
            Ok(())
        }
        _ => Err("a value that does not cross nodes".into()),
    }
}

/// Reads values of `types` from `bytes`, which they must fill exactly.
pub(crate) fn read_all(bytes: &[u8], types: &[Type]) -> Result<Vec<Val>, String> {
    let mut r = Reader { bytes, at: 0 };
    let vals = types
        .iter()
        .map(|t| r.val(t))
        .collect::<Result<Vec<_>, _>>()?;
    match r.at == bytes.len() {
        true => Ok(vals),
        false => Err("bytes past the values".into()),
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let got = self
            .bytes
            .get(self.at..self.at + N)
            .ok_or("values cut short")?;
        self.at += N;
        Ok(got.try_into().expect("N bytes"))
    }

    fn u32(&mut self) -> Result<u32, String> {
        self.take::<4>().map(u32::from_le_bytes)
    }

    /// A length, refused if more than the bytes left could hold.
    fn len(&mut self) -> Result<usize, String> {
        let n = self.u32()? as usize;
        match n <= self.bytes.len() - self.at {
            true => Ok(n),
            false => Err("a length past the values' end".into()),
        }
    }

    fn val(&mut self, ty: &Type) -> Result<Val, String> {
        Ok(match ty {
            Type::Bool => Val::Bool(self.take::<1>()?[0] != 0),
            Type::U8 => Val::U8(self.take::<1>()?[0]),
            Type::S8 => Val::S8(self.take::<1>()?[0] as i8),
            Type::U16 => Val::U16(u16::from_le_bytes(self.take()?)),
            Type::S16 => Val::S16(i16::from_le_bytes(self.take()?)),
            Type::U32 => Val::U32(self.u32()?),
            Type::S32 => Val::S32(i32::from_le_bytes(self.take()?)),
            Type::U64 => Val::U64(u64::from_le_bytes(self.take()?)),
            Type::S64 => Val::S64(i64::from_le_bytes(self.take()?)),
            Type::Float32 => Val::Float32(f32::from_bits(self.u32()?)),
            Type::Float64 => Val::Float64(f64::from_bits(u64::from_le_bytes(self.take()?))),
            Type::Char => Val::Char(char::from_u32(self.u32()?).ok_or("not a char")?),
            Type::String => {
                let n = self.len()?;
                let s = std::str::from_utf8(&self.bytes[self.at..self.at + n])
                    .map_err(|_| "a string that is not UTF-8")?;
                self.at += n;
                Val::String(s.to_string())
            }
            Type::List(l) => {
                let (n, t) = (self.len()?, l.ty());
                Val::List((0..n).map(|_| self.val(&t)).collect::<Result<_, _>>()?)
            }
            Type::Record(r) => Val::Record(
                r.fields()
                    .map(|f| Ok((f.name.to_string(), self.val(&f.ty)?)))
                    .collect::<Result<_, String>>()?,
            ),
            Type::Tuple(t) => {
                Val::Tuple(t.types().map(|t| self.val(&t)).collect::<Result<_, _>>()?)
            }
            other => self.case(other)?,
        })
    }

    /// A case's payload, if its type `t` has one.
    fn payload(&mut self, t: Option<Type>) -> Result<Option<Box<Val>>, String> {
        t.map(|t| self.val(&t).map(Box::new)).transpose()
    }

    /// [`Reader::val`] for the types with cases and tags.
    fn case(&mut self, ty: &Type) -> Result<Val, String> {
        Ok(match ty {
            Type::Variant(v) => {
                let i = self.u32()? as usize;
                let case = v.cases().nth(i).ok_or("an unknown case")?;
                let name = case.name.to_string();
                Val::Variant(name, self.payload(case.ty)?)
            }
            Type::Enum(e) => {
                let i = self.u32()? as usize;
                Val::Enum(e.names().nth(i).ok_or("an unknown case")?.to_string())
            }
            Type::Option(o) => match self.take::<1>()?[0] {
                0 => Val::Option(None),
                1 => Val::Option(self.payload(Some(o.ty()))?),
                _ => return Err("a bad option tag".into()),
            },
            Type::Result(r) => match self.take::<1>()?[0] {
                0 => Val::Result(Ok(self.payload(r.ok())?)),
                1 => Val::Result(Err(self.payload(r.err())?)),
                _ => return Err("a bad result tag".into()),
            },
            Type::Flags(f) => {
                let names: Vec<&str> = f.names().collect();
                let words: Vec<u32> = (0..names.len().div_ceil(32))
                    .map(|_| self.u32())
                    .collect::<Result<_, _>>()?;
                let set = (names.iter().enumerate())
                    .filter(|(i, _)| words[i / 32] & (1 << (i % 32)) != 0)
                    .map(|(_, n)| n.to_string());
                Val::Flags(set.collect())
            }
            _ => return Err("a type that does not cross nodes".into()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::component::types::ComponentItem;

    /// The parameter types of a function `f` a component imports: every
    /// shape the encoding writes.
    fn types() -> Vec<Type> {
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true);
        let engine = wasmtime::Engine::new(&config).unwrap();
        let wat = r#"(component
          (type $r' (record (field "a" u32) (field "b" string)))
          (import "r" (type $r (eq $r')))
          (type $v' (variant (case "x" u8) (case "y")))
          (import "v" (type $v (eq $v')))
          (type $e' (enum "p" "q"))
          (import "e" (type $e (eq $e')))
          (type $f' (flags "f0" "f1" "f2"))
          (import "fl" (type $f (eq $f')))
          (import "f" (func (param "l" (list $r)) (param "v" $v) (param "o" (option $e))
            (param "res" (result u32 (error string))) (param "fl" $f) (param "c" char)
            (param "t" (tuple s64 float64 bool))))
        )"#;
        let bytes = wat::parse_str(wat).unwrap();
        let c = wasmtime::component::Component::new(&engine, bytes).unwrap();
        let ty = c.component_type();
        let Some(ComponentItem::ComponentFunc(f)) = ty.get_import(&engine, "f").map(|e| e.ty)
        else {
            panic!("no f");
        };
        f.params().map(|(_, t)| t).collect()
    }

    fn vals() -> Vec<Val> {
        let rec = |a, b: &str| {
            Val::Record(vec![
                ("a".into(), Val::U32(a)),
                ("b".into(), Val::String(b.into())),
            ])
        };
        vec![
            Val::List(vec![rec(1, "one"), rec(2, "")]),
            Val::Variant("x".into(), Some(Box::new(Val::U8(9)))),
            Val::Option(Some(Box::new(Val::Enum("q".into())))),
            Val::Result(Err(Some(Box::new(Val::String("no".into()))))),
            Val::Flags(vec!["f0".into(), "f2".into()]),
            Val::Char('✓'),
            Val::Tuple(vec![Val::S64(-5), Val::Float64(1.5), Val::Bool(true)]),
        ]
    }

    #[test]
    fn every_shape_reads_back_as_written() {
        let (ts, vs) = (types(), vals());
        let mut bytes = Vec::new();
        for (v, t) in vs.iter().zip(&ts) {
            write(v, t, &mut bytes).unwrap();
        }
        assert_eq!(read_all(&bytes, &ts).unwrap(), vs);
        // Every cut is refused, as are bytes left over.
        for n in 0..bytes.len() {
            assert!(read_all(&bytes[..n], &ts).is_err(), "cut at {n}");
        }
        bytes.push(0);
        assert!(read_all(&bytes, &ts).is_err());
    }

    #[test]
    fn hostile_bytes_are_refused_before_anything_is_allocated() {
        let ts = types();
        // A list claiming 4 billion records in a few bytes.
        assert!(read_all(&[0xff, 0xff, 0xff, 0xff], &ts[..1]).is_err());
        // An unknown variant case, a bad option tag, a bad char.
        assert!(read_all(&[7, 0, 0, 0], &ts[1..2]).is_err());
        assert!(read_all(&[2], &ts[2..3]).is_err());
        assert!(read_all(&[0, 0xd8, 0, 0], &ts[5..6]).is_err());
    }
}
