"""dashraker: generators, verification and trace mapping for sparse and term-serial training accelerators."""
