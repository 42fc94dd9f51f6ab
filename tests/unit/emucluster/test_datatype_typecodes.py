"""Type codes (emucluster.mpi.datatype.typecodes): ``tocode`` / ``fromcode`` round trips over
every predefined type, ``typechar`` / ``typestr`` of derived types, and the plain lookups."""

from __future__ import annotations

import numpy as np
import pytest

from emucluster.mpi.datatype.datatype import Datatype, predefined
from emucluster.mpi.datatype.named import NAMED
from emucluster.mpi.datatype.typecodes import CodeSource, code_name, type_char, type_code, type_str

INT = predefined["INT"]


def _coded() -> list[Datatype]:
    out = []
    for name in NAMED:
        try:
            predefined[name].tocode()
        except ValueError:
            continue
        out.append(predefined[name])
    return out


def test_every_code_maps_back_to_a_type_of_the_same_character_and_size() -> None:
    coded = _coded()
    assert len(coded) > 50
    for t in coded:
        back = Datatype.fromcode(t.tocode())
        assert (back.typechar, back.size) == (t.typechar, t.size), t.name
        assert back.is_named


def test_type_strings_are_numpy_type_strings_of_the_right_size() -> None:
    for t in _coded():
        if t.typestr[0] not in "SUV":  # characters and records have no numeric dtype here
            assert np.dtype(t.typestr).itemsize == t.size, t.name


def test_fixed_width_types_use_their_type_string_as_code() -> None:
    assert predefined["INT32_T"].tocode() == "i4"
    assert predefined["REAL16"].tocode() == "f16"
    assert (INT.tocode(), INT.typechar, INT.typestr) == ("i", "i", "i4")
    assert Datatype.fromcode("f8") is predefined["DOUBLE"]
    assert Datatype.fromcode("i") is INT


def test_dup_and_f90_types_have_codes_and_null_has_none() -> None:
    """(Other derived types: test_typemap.test_type_codes_round_trip.)"""
    assert predefined["DOUBLE"].Dup().Dup().tocode() == "d"
    real = Datatype.Create_f90_real(10, 100)
    assert (real.typechar, real.typestr, real.tocode()) == ("d", "f8", "f8")
    assert Datatype.Create_f90_integer(3).Dup().tocode() == "i2"
    null = predefined["DATATYPE_NULL"]
    assert (null.typechar, null.typestr) == ("", "")
    with pytest.raises(ValueError, match="cannot map"):
        null.tocode()


def test_lookups_are_plain_functions_of_names() -> None:
    assert code_name("i") == "INT"
    assert code_name("c16") == "C_DOUBLE_COMPLEX"
    assert type_char(CodeSource("MPI_SHORT", "NAMED", 2)) == "h"
    assert type_code(CodeSource("", "F90_INTEGER", 8)) == "i8"
    assert type_char(CodeSource("", "F90_COMPLEX", 16)) == "D"
    renamed = CodeSource("my_int", "NAMED", 4)  # not a predefined name: no code
    assert (type_char(renamed), type_str(renamed, 4)) == ("V", "V4")
    assert type_str(None, 0) == ""
    with pytest.raises(ValueError, match="cannot map"):
        code_name("zz")
