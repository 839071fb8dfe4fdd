package yaps_test

import (
	"context"
	"fmt"

	"github.com/yaps-dev/yaps/store/memstore"
	"github.com/yaps-dev/yaps/yaps"
)

func Example() {
	ctx := context.Background()
	svc, err := yaps.NewService(yaps.Config{Store: memstore.New()})
	if err != nil {
		panic(err)
	}
	defer svc.Close()

	created, _ := svc.CreateList(ctx, yaps.CreateListInput{Title: yaps.Set("Groceries"), Kind: yaps.Set("tasks")})
	owner, _ := svc.Authenticate(ctx, created.List.Ref, created.OwnerCode)

	milk, _, _ := svc.CreateYap(ctx, owner, yaps.KindTask, yaps.YapFields{
		Content: yaps.Set("Buy milk"),
		Status:  yaps.Set(yaps.StatusOpen),
	}, "", nil)
	done, _ := svc.UpdateYap(ctx, owner, milk.ID, yaps.YapFields{
		Content: yaps.Set("Buy oat milk"),
		Status:  yaps.Set(yaps.StatusDone),
	}, yaps.YapETag(milk))

	viewer, _ := svc.IssuePermission(ctx, owner, yaps.RoleViewer, "family", nil)
	v, _ := svc.Authenticate(ctx, created.List.Ref, viewer.Code)
	_, _, err = svc.CreateYap(ctx, v, yaps.KindTask, yaps.YapFields{}, "", nil)

	page, _ := svc.ListYaps(ctx, v, "", 0, false)
	fmt.Println(created.List.Kind, done.Content, done.Status, len(page.Yaps))
	fmt.Println(yaps.ErrorCode(err))
	// Output:
	// task Buy oat milk done 1
	// forbidden
}
