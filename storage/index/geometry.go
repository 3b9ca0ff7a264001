package index

// Geometry of new files (see doc.go, "Geometry of new files"): the first
// file of an empty index is small and each roll multiplies the geometry by
// growthFactor, up to the Options.
const (
	// firstFileDivisor divides the configured geometry for the first file.
	firstFileDivisor = 64
	// minFirstSlots and minFirstEntries keep the first file from being
	// uselessly small (never above the Options).
	minFirstSlots   = 256
	minFirstEntries = 1024
	// growthFactor is how much larger each new file is than the previous one.
	growthFactor = 4
)

// firstGeometry is the geometry of the first file of an empty index.
func firstGeometry(o Options) geometry {
	return geometry{
		slots:    uint32(min(o.SlotCount, max(o.SlotCount/firstFileDivisor, minFirstSlots))),
		capacity: uint32(min(o.EntryCount, max(o.EntryCount/firstFileDivisor, minFirstEntries))),
	}
}

// nextGeometry is the geometry of the file that follows prev (nil: the
// index is empty).
func nextGeometry(o Options, prev *file) geometry {
	g := firstGeometry(o)
	if prev == nil {
		return g
	}
	g.slots = uint32(min(int64(o.SlotCount), max(int64(g.slots), int64(prev.slotCount)*growthFactor)))
	g.capacity = uint32(min(int64(o.EntryCount), max(int64(g.capacity), int64(prev.capacity)*growthFactor)))
	return g
}

// growthGeometries lists every geometry the growth sequence can give a new
// file under o, the full one first, so that a file without a readable
// header can still be sized.
func growthGeometries(o Options) []geometry {
	full := geometry{uint32(o.SlotCount), uint32(o.EntryCount)}
	out := []geometry{full}
	g := firstGeometry(o)
	for g != full {
		out = append(out, g)
		g = geometry{
			slots:    uint32(min(int64(o.SlotCount), int64(g.slots)*growthFactor)),
			capacity: uint32(min(int64(o.EntryCount), int64(g.capacity)*growthFactor)),
		}
	}
	return out
}
