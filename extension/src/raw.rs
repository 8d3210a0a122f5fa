//! Values passed through as they came: a pgvector `vector`, a `jsonb`, a `tsquery`, a `text[]`,
//! kept as datums (decoding a jsonb into Rust and back would cost a parse
//! and could change its numbers). An argument is the caller's datum; a
//! value read from an SPI row is copied out of SPI's memory, into the
//! context of the function that read it, and can be returned.

use pgrx::callconv::{Arg, ArgAbi, BoxRet, FcInfo};
use pgrx::pg_sys;
use pgrx::pgrx_sql_entity_graph::metadata::{
    ArgumentError, ReturnsError, ReturnsRef, SqlMappingRef, SqlTranslatable, TypeOrigin,
};
use pgrx::PgMemoryContexts;
use pgrx::{FromDatum, IntoDatum};

macro_rules! raw_type {
    ($name:ident, $sql:literal, $fallback:expr, $compatible:expr, $doc:literal) => {
        #[doc = $doc]
        #[derive(Clone, Copy, Debug)]
        pub struct $name {
            datum: pg_sys::Datum,
            oid: pg_sys::Oid,
        }

        impl $name {
            /// The type the caller passed the value as.
            pub fn oid(&self) -> pg_sys::Oid {
                self.oid
            }
        }

        impl FromDatum for $name {
            const GET_TYPOID: bool = true;

            unsafe fn from_datum(datum: pg_sys::Datum, is_null: bool) -> Option<Self> {
                // Only without a call's types (an argument always comes
                // through from_polymorphic_datum): the type's fixed oid, if
                // it has one (InvalidOid for a vector, which _knn refuses).
                unsafe { Self::from_polymorphic_datum(datum, is_null, $fallback) }
            }

            unsafe fn from_polymorphic_datum(datum: pg_sys::Datum, is_null: bool, oid: pg_sys::Oid) -> Option<Self> {
                if is_null {
                    None
                } else {
                    Some(Self { datum, oid })
                }
            }

            unsafe fn from_datum_in_memory_context(
                mut memory_context: PgMemoryContexts,
                datum: pg_sys::Datum,
                is_null: bool,
                oid: pg_sys::Oid,
            ) -> Option<Self> {
                if is_null {
                    return None;
                }
                // SAFETY: a live varlena datum of this type (an SPI row's),
                // copied whole (detoasted) into the reader's context.
                let datum = unsafe {
                    memory_context
                        .switch_to(|_| pg_sys::Datum::from(pg_sys::pg_detoast_datum_copy(datum.cast_mut_ptr())))
                };
                Some(Self { datum, oid })
            }
        }

        impl IntoDatum for $name {
            fn into_datum(self) -> Option<pg_sys::Datum> {
                Some(self.datum)
            }

            fn type_oid() -> pg_sys::Oid {
                pg_sys::InvalidOid
            }

            fn is_compatible_with(other: pg_sys::Oid) -> bool {
                $compatible(other)
            }
        }

        // SAFETY: the datum is returned as it is, of the type declared.
        unsafe impl BoxRet for $name {
            unsafe fn box_into<'fcx>(self, fcinfo: &mut FcInfo<'fcx>) -> pgrx::datum::Datum<'fcx> {
                unsafe { fcinfo.return_raw_datum(self.datum) }
            }
        }

        // SAFETY: the datum is read as FromDatum reads it, with the
        // argument's type from the call expression.
        unsafe impl<'fcx> ArgAbi<'fcx> for $name {
            unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
                let index = arg.index();
                unsafe { arg.unbox_arg_using_from_datum() }
                    .unwrap_or_else(|| panic!("argument {index} must not be null"))
            }
        }

        // SAFETY: the SQL type is the literal named.
        unsafe impl SqlTranslatable for $name {
            const TYPE_IDENT: &'static str = pgrx::pgrx_resolved_type!($name);
            const TYPE_ORIGIN: TypeOrigin = TypeOrigin::External;
            const ARGUMENT_SQL: Result<SqlMappingRef, ArgumentError> = Ok(SqlMappingRef::literal($sql));
            const RETURN_SQL: Result<ReturnsRef, ReturnsError> = Ok(ReturnsRef::One(SqlMappingRef::literal($sql)));
        }
    };
}

// (a vector's type has no fixed oid: a column read as one must be a vector)
raw_type!(
    RawVector,
    "vector",
    pg_sys::InvalidOid,
    |_| true,
    "A pgvector `vector`."
);
raw_type!(
    RawJsonb,
    "jsonb",
    pg_sys::JSONBOID,
    |oid| oid == pg_sys::JSONBOID,
    "A `jsonb`."
);
raw_type!(
    RawTsquery,
    "tsquery",
    pg_sys::TSQUERYOID,
    |oid| oid == pg_sys::TSQUERYOID,
    "A `tsquery`."
);

raw_type!(
    RawTexts,
    "text[]",
    pg_sys::TEXTARRAYOID,
    |oid| oid == pg_sys::TEXTARRAYOID,
    "A `text[]` as the caller passed it (its dimensions kept for the checks)."
);

impl RawJsonb {
    /// A statement argument: the value with its own type, or a NULL jsonb.
    pub fn arg(value: Option<Self>) -> pgrx::datum::DatumWithOid<'static> {
        match value {
            // SAFETY: a live jsonb datum, with its own type's oid.
            Some(v) => unsafe { pgrx::datum::DatumWithOid::new(v, v.oid()) },
            None => pgrx::datum::DatumWithOid::null_oid(pg_sys::JSONBOID),
        }
    }
}

impl RawTexts {
    /// A statement argument: the array as it came (its dimensions kept), or
    /// a NULL text[].
    pub fn arg(value: Option<Self>) -> pgrx::datum::DatumWithOid<'static> {
        match value {
            // SAFETY: a live text[] datum, with its own type's oid.
            Some(v) => unsafe { pgrx::datum::DatumWithOid::new(v, v.oid()) },
            None => pgrx::datum::DatumWithOid::null_oid(pg_sys::TEXTARRAYOID),
        }
    }

    /// The array's elements, in storage order, whatever its dimensions.
    pub fn texts(&self) -> Vec<Option<String>> {
        // SAFETY: a live text[] datum (the call's argument).
        unsafe { Vec::<Option<String>>::from_polymorphic_datum(self.datum, false, self.oid) }.unwrap_or_default()
    }
}

impl RawVector {
    /// The vector's values. pgvector stores a vector as a varlena of
    /// `int16 dim, int16 unused, float4 x[dim]`.
    ///
    /// # Safety
    /// The datum must be a live `vector` (the call's argument).
    pub unsafe fn values(&self) -> Vec<f32> {
        unsafe {
            let ptr = pg_sys::pg_detoast_datum(self.datum.cast_mut_ptr());
            let len = pgrx::varlena::varsize_any_exhdr(ptr);
            let data = pgrx::varlena::vardata_any(ptr) as *const u8;
            let dim = if len >= 4 {
                usize::from(u16::from_ne_bytes([*data, *data.add(1)]))
            } else {
                0
            };
            if len != 4 + 4 * dim {
                pgrx::error!("engram: a vector of {len} bytes does not hold {dim} dimensions");
            }
            (0..dim)
                .map(|i| {
                    let p = data.add(4 + 4 * i);
                    f32::from_ne_bytes([*p, *p.add(1), *p.add(2), *p.add(3)])
                })
                .collect()
        }
    }
}
