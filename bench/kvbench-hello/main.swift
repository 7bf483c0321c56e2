// A hello-world Swift program that imports Foundation: the start-up cost `make bench` compares
// kvd's cold start with.
import Foundation

print("hello")
