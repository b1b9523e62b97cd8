package symheap

// memoryMonitorReport describes what the memory-release monitor can see.
func memoryMonitorReport() string { return "not wired yet" }
