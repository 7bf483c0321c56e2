print("kvctl")
