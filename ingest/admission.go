package ingest

import (
	"context"
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go"
)

// handleBudgetMsgs handles admission and release messages one at a time,
// in the order they arrived, until the receiver closes.
func (r *Receiver) handleBudgetMsgs(msgs <-chan *nats.Msg) {
	defer r.wg.Done()
	for {
		select {
		case <-r.base.Done():
			return
		case m := <-msgs:
			if m.Subject == r.cfg.Subjects.Release() {
				r.onRelease(m)
			} else {
				r.onAdmit(m)
			}
		}
	}
}

// onAdmit answers an AdmitRequest. Blocking requests wait in their own
// goroutine; the number of those is capped (r.admits), beyond which
// requests are refused at once, so a flood cannot grow sidecar memory.
func (r *Receiver) onAdmit(m *nats.Msg) {
	var req AdmitRequest
	reply := func(rep AdmitReply) {
		rep.Version = ProtocolVersion
		data, _ := json.Marshal(&rep)
		if err := m.Respond(data); err != nil {
			r.log.Debug("admission reply not sent", "err", err)
		}
	}
	if err := json.Unmarshal(m.Data, &req); err != nil {
		reply(AdmitReply{Error: errorf(CodeMalformed, "admission request is not valid JSON: %v", err)})
		return
	}
	if req.Version != ProtocolVersion {
		reply(AdmitReply{Error: errorf(CodeVersion, "protocol version %d: this sidecar speaks version %d", req.Version, ProtocolVersion)})
		return
	}
	if !ValidToken(req.MsgID) || !ValidToken(req.Producer) {
		reply(AdmitReply{Error: errorf(CodeInvalid, "admission needs msg_id and producer of 1-128 characters A-Z a-z 0-9 _ -")})
		return
	}
	pol, err := ParsePolicy(req.Policy)
	if req.Policy == "" {
		pol, err = Block, nil
	}
	if err != nil {
		reply(AdmitReply{Error: errorf(CodeInvalid, "%v", err)})
		return
	}
	if req.Renew {
		if !r.budget.Renew(req.MsgID, r.cfg.LeaseTTL) {
			reply(AdmitReply{Error: errorf(CodeLeaseUnknown, "no admission to renew for msg_id %s (it expired, was released, or its snapshot was already announced or answered): a notification is counted when it arrives", req.MsgID)})
			return
		}
		reply(AdmitReply{Granted: true, LeaseMS: r.cfg.LeaseTTL.Milliseconds()})
		return
	}
	wait := time.Duration(req.TimeoutMS) * time.Millisecond
	if pol == Fail || wait <= 0 {
		err := r.budget.Acquire(context.Background(), req.MsgID, req.Bytes, false, r.cfg.LeaseTTL)
		r.answerAdmit(reply, req, err)
		return
	}
	select {
	case r.admits <- struct{}{}:
	default:
		reply(AdmitReply{Error: errorf(CodeBudgetFull, "too many producers already waiting for budget")})
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer func() { <-r.admits }()
		ctx, cancel := context.WithTimeout(r.base, min(wait, r.cfg.MaxBlock))
		defer cancel()
		err := r.budget.Acquire(ctx, req.MsgID, req.Bytes, true, r.cfg.LeaseTTL)
		r.answerAdmit(reply, req, err)
	}()
}

func (r *Receiver) answerAdmit(reply func(AdmitReply), req AdmitRequest, err error) {
	if err != nil {
		e := AsError(err)
		r.log.Info("admission refused", "producer", req.Producer, "msg_id", req.MsgID, "bytes", req.Bytes, "code", e.Code)
		reply(AdmitReply{Error: e})
		return
	}
	reply(AdmitReply{Granted: true, LeaseMS: r.cfg.LeaseTTL.Milliseconds()})
}

// onRelease returns an admission whose notification will never come. It
// cannot release a snapshot already announced, so a confused or hostile
// producer cannot make the budget under-count.
func (r *Receiver) onRelease(m *nats.Msg) {
	var req ReleaseRequest
	if json.Unmarshal(m.Data, &req) != nil || !ValidToken(req.MsgID) {
		return
	}
	r.budget.ReleaseLease(req.MsgID)
}

func (r *Receiver) onStatus(m *nats.Msg) {
	used, holds := r.budget.Used()
	data, _ := json.Marshal(&Status{Version: ProtocolVersion, BudgetBytes: r.budget.Limit(), UsedBytes: used,
		Holds: holds, InFlight: r.InFlight(), Features: r.cfg.Features}) // snapshots being worked on, not fetch slots
	_ = m.Respond(data)
}
