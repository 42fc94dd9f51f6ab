"""NIC-multicast broadcast (seed 001): the algorithm, its trees and the port shell."""
