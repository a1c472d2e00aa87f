//! rdt-sim (being written).
