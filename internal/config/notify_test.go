package config

import "testing"

func TestNotifyForms(t *testing.T) {
	c, err := parse("c.yaml", []byte("notify: [http://a, http://b]\n"))
	if err != nil || len(c.Notify.Webhooks) != 2 {
		t.Fatalf("%v %+v", err, c)
	}
	c, err = parse("c.yaml", []byte("notify:\n  webhooks: [http://a]\n  timeout: 2s\n  slack: {webhook_url_env: S}\n  telegram: {token_env: T, chat_id: '1', api_url: 'http://x'}\n  email: {smtp: 'h:25', from: a@b, to: [c@d], password_env: P}\n"))
	if err != nil || c.Notify.Slack == nil || c.Notify.Telegram.ChatID != "1" || c.Notify.Email.To[0] != "c@d" {
		t.Fatalf("%v %+v", err, c)
	}
	_, err = parse("c.yaml", []byte("notify:\n  slak: {}\n"))
	t.Log(err)
	if err == nil {
		t.Fatal("typo accepted")
	}
}
