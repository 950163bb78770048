"""FPRaker term-serial floating-point PE and tile (SPEC section 4)."""

from dashraker.hw.fpraker.bounds import Bounds
from dashraker.hw.fpraker.decoder import Decoder
from dashraker.hw.fpraker.encoder import TermEncoder
from dashraker.hw.fpraker.exponent_unit import ExponentUnit
from dashraker.hw.fpraker.front_end import FrontEnd
from dashraker.hw.fpraker.lane import Lane
from dashraker.hw.fpraker.output import OutputStage
from dashraker.hw.fpraker.pe import PE
from dashraker.hw.fpraker.rounder import Rounder
from dashraker.hw.fpraker.sequencer import Sequencer
from dashraker.hw.fpraker.tile import Tile

__all__ = ["TermEncoder", "Decoder", "ExponentUnit", "Bounds", "FrontEnd", "Lane", "PE", "Sequencer", "Rounder",
           "OutputStage", "Tile"]
