package yaps

// op is an operation class of the role table (RULINGS R5).
type op int

const (
	opRead        op = iota // GET list, yaps, snapshot; read-only sync
	opEditList              // PATCH list: title, kind, archive, unarchive
	opArchiveList           // DELETE list (archive)
	opWriteYap              // create, edit, delete, restore a yap of a kind; sync writes
	opManage                // list, issue, revoke permissions; rotate owner
	opRollup                // rollup into an account
	opAudit                 // read the audit log
	opWriteOther            // sync writes to root types outside the schema (R9 keeps them)
)

func (o op) String() string {
	switch o {
	case opRead:
		return "read"
	case opEditList:
		return "edit the list"
	case opArchiveList:
		return "archive the list"
	case opWriteYap:
		return "write yaps"
	case opManage:
		return "manage permissions"
	case opRollup:
		return "roll up the list"
	case opAudit:
		return "read the audit log"
	case opWriteOther:
		return "change data outside the yaps"
	}
	return "do this"
}

// scopes returns the effective scopes of an agent permission: the stored
// ones, or the default tasks:write when none were stored.
func (p *Permission) scopes() []Scope {
	if len(p.Scopes) == 0 {
		return []Scope{ScopeTasksWrite}
	}
	return p.Scopes
}

func (p *Permission) hasScope(s Scope) bool {
	for _, x := range p.scopes() {
		if x == s {
			return true
		}
	}
	return false
}

// allowed is the role table of RULINGS R5, the only place that decides what
// a role may do. kind matters only for opWriteYap ("" asks whether the role
// may write any yap at all, as sync does before looking at the update).
func allowed(p *Permission, o op, kind Kind) bool {
	switch p.Role {
	case RoleOwner:
		return true
	case RoleEditor:
		return o == opRead || o == opEditList || o == opWriteYap || o == opWriteOther
	case RoleViewer:
		return o == opRead
	case RoleAgent:
		switch o {
		case opRead:
			return true
		case opWriteYap:
			if p.hasScope(ScopeYapsWrite) {
				return true
			}
			return p.hasScope(ScopeTasksWrite) && (kind == KindTask || kind == "")
		}
	}
	return false
}

// can returns nil if the actor may do o (on yaps of kind), else EFORBIDDEN.
// It does not look at the archive state; see writable.
func (a *Actor) can(o op, kind Kind) error {
	if a == nil || a.Permission == nil || a.List == nil {
		return Errorf(EUNAUTHORIZED, "a permission code is required")
	}
	if !allowed(a.Permission, o, kind) {
		if o == opWriteYap && kind != "" && a.Permission.Role == RoleAgent {
			return Errorf(EFORBIDDEN, "this agent code may not write %s yaps", kind)
		}
		return Errorf(EFORBIDDEN, "the %s role may not %s", a.Permission.Role, o)
	}
	return nil
}

// writable returns EFORBIDDEN when l is archived.
func writable(l *List) error {
	if l.Archived() {
		return errArchived
	}
	return nil
}

var errArchived = Errorf(EFORBIDDEN, "the list is archived; unarchive it (PATCH archivedAt: null) to write")
