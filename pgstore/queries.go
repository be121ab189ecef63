package pgstore

import _ "embed"

// The statements of the single-lock fast paths (acquire, release, renewal,
// check), with the same placeholders as the migrations.
var (
	//go:embed queries/acquire1.sql
	acquireOneSQL string
	//go:embed queries/release1.sql
	releaseOneSQL string
	//go:embed queries/release1ev.sql
	releaseOneEvSQL string
	//go:embed queries/acquire1ev.sql
	acquireOneEvSQL string
	//go:embed queries/acquire1slow.sql
	acquireSlowSQL string
	//go:embed queries/release1slow.sql
	releaseSlowSQL string
	//go:embed queries/acquireN.sql
	acquireManySQL string
	//go:embed queries/releaseN.sql
	releaseManySQL string
	//go:embed queries/keep.sql
	keepOneSQL string
	//go:embed queries/held.sql
	heldOneSQL string
)
