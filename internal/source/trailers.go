package source

// ItemTrailer is the commit trailer that names the item a commit is of,
// by the kind of source (engine.State.Source): the dashboards find the
// commit of an item that passed in an earlier run by it. "" for a kind
// whose commits name no item.
func ItemTrailer(kind string) string {
	return map[string]string{"prd": storyTrailer, "tasks": taskTrailer, "pipeline": stageTrailer}[kind]
}
