print("kvd")
